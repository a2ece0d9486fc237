import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../platform/errors.ts';
import { placeholders, renderTemplate, renderWhatsAppTemplate, templateContentProblem, validateTemplateContent } from './templating.ts';

function errorOf(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ServiceError) return e;
    throw e;
  }
  throw new Error('expected a ServiceError');
}

describe('placeholders', () => {
  it('lists distinct names in order of first appearance', () => {
    expect(placeholders('Hi {{name}}, your code is {{ code }}. Bye {{name}} ({{order.id}}, {{1}})')).toEqual(['name', 'code', 'order.id', '1']);
  });

  it('allows whitespace (including newlines) inside the braces', () => {
    expect(placeholders('{{   a   }} {{\tb\n}}')).toEqual(['a', 'b']);
  });

  it('returns nothing for plain text and ignores malformed braces', () => {
    expect(placeholders('No placeholders { here }')).toEqual([]);
    expect(placeholders('{{ first name }} {{}} {{ unclosed')).toEqual([]);
  });
});

describe('validateTemplateContent', () => {
  it('accepts valid templates and single braces', () => {
    for (const ok of ['Hello {{name}}', 'Plain', '{{a}}{{b}}', 'Use {curly} and } and { freely', '{{ x.y_z }}', 'Price: {{1}} {{2}}', '{{a}}}']) {
      expect(() => validateTemplateContent(ok), ok).not.toThrow();
      expect(templateContentProblem(ok), ok).toBeUndefined();
    }
  });

  it('rejects unclosed, unopened, empty, nested and invalid placeholders with INVALID_TEMPLATE on content', () => {
    for (const bad of ['Hello {{ unclosed', 'Hello name}}', '{{}}', '{{  }}', '{{ first name }}', '{{na-me}}', '{{ {{a}} }}', '{{{a}}}', '{{.a}}', '{{a.}}', '{{a..b}}', '{{a}}}}', 'ok {{a}} then {{b']) {
      const e = errorOf(() => validateTemplateContent(bad));
      expect(e.code, bad).toBe('INVALID_TEMPLATE');
      expect(e.details, bad).toEqual({ field: 'content' });
    }
  });

  it('says where the problem is', () => {
    expect(templateContentProblem('ok {{a}} then {{b')).toMatch(/Unclosed.*position 14/);
    expect(templateContentProblem('ab}}')).toMatch(/position 2/);
    expect(templateContentProblem('{{ first name }}')).toMatch(/Invalid placeholder name "first name"/);
  });
});

describe('renderTemplate', () => {
  it('replaces every occurrence of every placeholder', () => {
    expect(renderTemplate('Hi {{name}}! {{ name }}, code {{code}}.', { name: 'Ada', code: '1234' })).toBe('Hi Ada! Ada, code 1234.');
  });

  it('stringifies numbers, booleans, zero and empty strings', () => {
    expect(renderTemplate('{{n}}|{{z}}|{{b}}|{{f}}|{{e}}|', { n: 42.5, z: 0, b: true, f: false, e: '' })).toBe('42.5|0|true|false||');
  });

  it('does not expand values that contain braces', () => {
    expect(renderTemplate('Hello {{name}}', { name: '{{secret}}', secret: 'leak' })).toBe('Hello {{secret}}');
  });

  it('inserts $ patterns literally', () => {
    expect(renderTemplate('Total {{amount}}', { amount: "$& $' $1" })).toBe("Total $& $' $1");
  });

  it('resolves dotted names from a flat key first, then a nested path', () => {
    expect(renderTemplate('{{order.id}}', { 'order.id': 'flat', order: { id: 'nested' } })).toBe('flat');
    expect(renderTemplate('{{order.id}} {{order.total}}', { order: { id: 'A1', total: 9 } })).toBe('A1 9');
  });

  it('throws INVALID_TEMPLATE listing every missing (undefined or null) variable', () => {
    const e = errorOf(() => renderTemplate('{{a}} {{b}} {{c}} {{a}}', { b: null, c: 'ok' }));
    expect(e.code).toBe('INVALID_TEMPLATE');
    expect(e.message).toBe('Missing template variables: a, b');
    expect(e.details).toEqual({ missing: ['a', 'b'] });
  });

  it('does not look up inherited properties', () => {
    const e = errorOf(() => renderTemplate('{{toString}} {{constructor.name}}', {}));
    expect(e.details).toEqual({ missing: ['toString', 'constructor.name'] });
  });

  it('returns content without placeholders unchanged', () => {
    expect(renderTemplate('No variables {here}', {})).toBe('No variables {here}');
  });
});

describe('renderWhatsAppTemplate', () => {
  const body = (...texts: string[]) => [{ type: 'body', parameters: texts.map((text) => ({ type: 'text', text })) }];

  it('fills {{1}}, {{2}} positionally from the body component', () => {
    expect(renderWhatsAppTemplate('Hi {{1}}, your order {{2}} ships today. {{1}}!', body('Ada', 'A-7'))).toBe('Hi Ada, your order A-7 ships today. Ada!');
  });

  it('uses the number, not the order of appearance, for positional placeholders', () => {
    expect(renderWhatsAppTemplate('{{2}} before {{1}}', body('first', 'second'))).toBe('second before first');
  });

  it('finds the body component case-insensitively among others', () => {
    const components = [
      { type: 'header', parameters: [{ type: 'text', text: 'HEADER' }] },
      { type: 'BODY', parameters: [{ type: 'text', text: 'Ada' }] },
      { type: 'button', parameters: [{ type: 'payload', text: 'x' }] },
    ];
    expect(renderWhatsAppTemplate('Hello {{1}}', components)).toBe('Hello Ada');
  });

  it('fills named placeholders in order of first appearance', () => {
    expect(renderWhatsAppTemplate('{{name}} owes {{amount}}; thanks {{name}}', body('Ada', '$5'))).toBe('Ada owes $5; thanks Ada');
  });

  it('ignores extra parameters and renders templates without placeholders', () => {
    expect(renderWhatsAppTemplate('Hi {{1}}', body('a', 'b', 'c'))).toBe('Hi a');
    expect(renderWhatsAppTemplate('Static text', undefined)).toBe('Static text');
    expect(renderWhatsAppTemplate('Static text', [])).toBe('Static text');
  });

  it('does not expand parameters that contain braces', () => {
    expect(renderWhatsAppTemplate('{{1}} {{2}}', body('{{2}}', 'x'))).toBe('{{2}} x');
  });

  it('throws INVALID_TEMPLATE with details.missing when parameters are too few', () => {
    const e = errorOf(() => renderWhatsAppTemplate('{{1}} {{2}} {{3}}', body('only one')));
    expect(e.code).toBe('INVALID_TEMPLATE');
    expect(e.details).toEqual({ missing: ['2', '3'] });
    expect(errorOf(() => renderWhatsAppTemplate('Hi {{1}}', undefined)).details).toEqual({ missing: ['1'] });
    expect(errorOf(() => renderWhatsAppTemplate('Hi {{1}}', [{ type: 'header', parameters: [{ type: 'text', text: 'x' }] }])).details).toEqual({ missing: ['1'] });
    expect(errorOf(() => renderWhatsAppTemplate('Hi {{name}}', [{ type: 'body' }])).details).toEqual({ missing: ['name'] });
  });

  it('treats a parameter without text, and {{0}}, as missing', () => {
    expect(errorOf(() => renderWhatsAppTemplate('Hi {{1}}', [{ type: 'body', parameters: [{ type: 'currency' }] }])).details).toEqual({ missing: ['1'] });
    expect(errorOf(() => renderWhatsAppTemplate('Hi {{0}}', body('x'))).details).toEqual({ missing: ['0'] });
  });
});
