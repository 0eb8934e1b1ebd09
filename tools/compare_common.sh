# Sourced by tools/compare_llamacpp.sh and tools/compare_batched.sh.
# alternate_engines REPS MODEL...: REPS repetitions on each model, each one `run_engine ridge MODEL`
# and `run_engine llama.cpp MODEL` (run_engine is the caller's), the first engine swapping each
# repetition so that drift of this shared machine hits both alike.
alternate_engines() {
  local reps=$1 model rep engine
  shift
  for model in "$@"; do
    for ((rep = 1; rep <= reps; rep++)); do
      local order=(ridge llama.cpp)
      (( rep % 2 )) || order=(llama.cpp ridge)
      echo "  $(basename "$model"): repetition $rep/$reps (${order[0]} first)" >&2
      for engine in "${order[@]}"; do run_engine "$engine" "$model"; done
    done
  done
}
