/**
 * TwiML voice documents: parsed (fast-xml-parser) into their verbs in order, each with its
 * attributes, its text and its nested verbs (`<Gather>`'s `<Say>`, `<Dial>`'s `<Number>`). A
 * document that is not well-formed XML, or whose root is not `<Response>`, is Twilio's 12100
 * "Document parse failure".
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';

export type Verb = { name: string; attrs: Record<string, string>; text: string; children: Verb[] };

export class TwimlError extends Error {
  /** Twilio's error code: 12100 parse failure, 11200 HTTP retrieval failure, 11205 connection failure. */
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.name = 'TwimlError';
    this.code = code;
  }
}

const parser = new XMLParser({
  preserveOrder: true, ignoreAttributes: false, attributeNamePrefix: '', parseTagValue: false, parseAttributeValue: false, trimValues: true,
  processEntities: true,
});

type Node = Record<string, unknown> & { ':@'?: Record<string, string> };

function verbsOf(nodes: Node[]): Verb[] {
  const out: Verb[] = [];
  for (const node of nodes) {
    const name = Object.keys(node).find((k) => k !== ':@');
    if (!name || name === '#text' || name.startsWith('?')) continue;
    const inner = (node[name] as Node[] | undefined) ?? [];
    const text = inner.map((n) => (typeof n['#text'] === 'string' || typeof n['#text'] === 'number' ? String(n['#text']) : '')).join('').trim();
    out.push({ name, attrs: { ...(node[':@'] ?? {}) }, text, children: verbsOf(inner) });
  }
  return out;
}

/** The document's verbs; a TwimlError 12100 when it cannot be read as TwiML. */
export function parseTwiml(xml: string): Verb[] {
  const valid = XMLValidator.validate(xml);
  if (valid !== true) throw new TwimlError(12100, `Document parse failure: ${valid.err.msg} (line ${valid.err.line}, column ${valid.err.col})`);
  const roots = verbsOf(parser.parse(xml) as Node[]);
  if (roots.length !== 1 || roots[0]!.name !== 'Response') throw new TwimlError(12100, 'Document parse failure: the root element must be <Response>');
  return roots[0]!.children;
}
