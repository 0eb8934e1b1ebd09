// Reading SVG documents in tests with libxml2: a strict parse (any well-formedness or encoding
// error fails it, nothing is recovered), flattened into the list of elements in document order
// with their attributes, text content and parent, so tests can look elements up by tag and class.
#pragma once
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ridge::test {

struct XmlElement {
    std::string name;                          // local name: "svg", "circle", ...
    std::string ns;                            // namespace URI ("" for none)
    std::map<std::string, std::string> attrs;  // attribute values, entities decoded
    std::string text;                          // all text inside, entities decoded
    int parent = -1;                           // index in XmlDoc::elements (-1: the root)

    bool has(const std::string& a) const { return attrs.count(a) != 0; }
    std::string attr(const std::string& a) const { return has(a) ? attrs.at(a) : std::string(); }
    double num(const std::string& a) const { return std::stod(attrs.at(a)); }  // throws when absent
};

struct XmlDoc {
    bool ok = false;
    std::string error;                  // libxml2's message when !ok
    std::vector<XmlElement> elements;   // document order; elements[0] is the root

    // Elements with this tag and (when cls is not empty) this class attribute.
    std::vector<const XmlElement*> find(const std::string& tag, const std::string& cls = "") const {
        std::vector<const XmlElement*> out;
        for (const XmlElement& e : elements)
            if (e.name == tag && (cls.empty() || e.attr("class") == cls)) out.push_back(&e);
        return out;
    }
    // The nearest ancestor of `e` with this tag, or nullptr.
    const XmlElement* ancestor(const XmlElement& e, const std::string& tag) const {
        for (int p = e.parent; p >= 0; p = elements[size_t(p)].parent)
            if (elements[size_t(p)].name == tag) return &elements[size_t(p)];
        return nullptr;
    }
};

inline void flatten(xmlNode* node, int parent, XmlDoc& doc) {
    for (xmlNode* n = node; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE) continue;
        XmlElement e;
        e.name = reinterpret_cast<const char*>(n->name);
        if (n->ns && n->ns->href) e.ns = reinterpret_cast<const char*>(n->ns->href);
        for (xmlAttr* a = n->properties; a; a = a->next) {
            xmlChar* v = xmlNodeListGetString(n->doc, a->children, 1);
            e.attrs[reinterpret_cast<const char*>(a->name)] = v ? reinterpret_cast<const char*>(v) : "";
            xmlFree(v);
        }
        xmlChar* t = xmlNodeGetContent(n);
        e.text = t ? reinterpret_cast<const char*>(t) : "";
        xmlFree(t);
        e.parent = parent;
        doc.elements.push_back(e);
        flatten(n->children, int(doc.elements.size()) - 1, doc);
    }
}

// Parses `text` as XML (no network, no DTD loading, no recovery).
inline XmlDoc parse_xml(const std::string& text) {
    XmlDoc doc;
    std::unique_ptr<xmlParserCtxt, void (*)(xmlParserCtxtPtr)> ctxt(xmlNewParserCtxt(), xmlFreeParserCtxt);
    if (!ctxt) {
        doc.error = "xmlNewParserCtxt failed";
        return doc;
    }
    std::unique_ptr<xmlDoc, void (*)(xmlDocPtr)> d(
        xmlCtxtReadMemory(ctxt.get(), text.data(), int(text.size()), "roofline.svg", nullptr,
                          XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING),
        xmlFreeDoc);
    if (!d || !ctxt->wellFormed) {
        const xmlError* err = xmlCtxtGetLastError(ctxt.get());
        doc.error = err && err->message ? std::string(err->message) + " (line " + std::to_string(err->line) + ")"
                                        : "not well-formed";
        return doc;
    }
    flatten(xmlDocGetRootElement(d.get()), -1, doc);
    doc.ok = !doc.elements.empty();
    if (!doc.ok) doc.error = "no root element";
    return doc;
}

}  // namespace ridge::test
