/**
 * Message templates: `{{ name }}` placeholders (letters, digits, underscore and dot; whitespace
 * inside the braces allowed), checked when a template is created and filled when a message is
 * sent. WhatsApp templates are filled positionally from the `body` component's parameters.
 * Rendering is a single pass: a value that itself contains braces is inserted literally.
 */
import { ServiceError } from '../../platform/errors.ts';

const NAME = '[A-Za-z0-9_]+(?:\\.[A-Za-z0-9_]+)*';
const PLACEHOLDER_NAME = new RegExp(`^${NAME}$`);
/** A well-formed placeholder; group 1 is the name. */
const PLACEHOLDER = new RegExp(`\\{\\{\\s*(${NAME})\\s*\\}\\}`, 'g');

/** Whether `name` is a valid placeholder name (`first_name`, `1`, `order.id`). */
export function isPlaceholderName(name: string): boolean {
  return PLACEHOLDER_NAME.test(name);
}

/** Distinct placeholder names in order of first appearance. */
export function placeholders(content: string): string[] {
  const seen = new Set<string>();
  for (const m of content.matchAll(PLACEHOLDER)) seen.add(m[1]!);
  return [...seen];
}

/** Why `content` is not a valid template, or undefined when it is. Single braces are plain text. */
export function templateContentProblem(content: string): string | undefined {
  let i = 0;
  while (i < content.length) {
    if (content.startsWith('{{', i)) {
      const end = content.indexOf('}}', i + 2);
      const inside = end < 0 ? '' : content.slice(i + 2, end);
      if (end < 0 || inside.includes('{{')) return `Unclosed placeholder: "{{" at position ${i} has no matching "}}"`;
      const name = inside.trim();
      if (name === '') return `Empty placeholder at position ${i}`;
      if (!isPlaceholderName(name)) {
        return `Invalid placeholder name "${name}" at position ${i}: use letters, digits, underscores and dots`;
      }
      i = end + 2;
    } else if (content.startsWith('}}', i)) {
      return `Unbalanced braces: "}}" at position ${i} has no matching "{{"`;
    } else {
      i += 1;
    }
  }
  return undefined;
}

/** Throws INVALID_TEMPLATE (details.field 'content') when braces are unbalanced or a placeholder name is invalid. */
export function validateTemplateContent(content: string): void {
  const problem = templateContentProblem(content);
  if (problem !== undefined) throw new ServiceError('INVALID_TEMPLATE', problem, { field: 'content' });
}

/** A value as it appears in a rendered message. */
function stringify(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** The variable for `name`: the key itself, else a dotted path into nested objects. */
function lookup(variables: Record<string, unknown>, name: string): unknown {
  if (Object.hasOwn(variables, name)) return variables[name];
  if (!name.includes('.')) return undefined;
  let current: unknown = variables;
  for (const part of name.split('.')) {
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, part)) return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

function missingVariables(missing: string[]): ServiceError {
  return new ServiceError('INVALID_TEMPLATE', `Missing template variables: ${missing.join(', ')}`, { missing });
}

/**
 * Replaces every placeholder with its variable. Undefined or null variables are missing:
 * INVALID_TEMPLATE with details.missing listing all of them.
 */
export function renderTemplate(content: string, variables: Record<string, unknown>): string {
  const values = new Map<string, string>();
  const missing: string[] = [];
  for (const name of placeholders(content)) {
    const value = lookup(variables, name);
    if (value === undefined || value === null) missing.push(name);
    else values.set(name, stringify(value));
  }
  if (missing.length > 0) throw missingVariables(missing);
  return content.replace(PLACEHOLDER, (_whole, name: string) => values.get(name)!);
}

export type WhatsAppTemplateParameter = { type: string; text?: string };
export type WhatsAppTemplateComponentInput = { type: string; parameters?: WhatsAppTemplateParameter[] };

/**
 * Fills a WhatsApp template from the parameters of its `body` component (type compared
 * case-insensitively): `{{1}}`, `{{2}}` … take parameters[0], [1] …; named placeholders take the
 * parameters in their order of first appearance. A placeholder without a parameter (or whose
 * parameter has no text) is missing: INVALID_TEMPLATE with details.missing. Extra parameters are ignored.
 */
export function renderWhatsAppTemplate(content: string, components: WhatsAppTemplateComponentInput[] | undefined): string {
  const body = components?.find((c) => c.type.toLowerCase() === 'body');
  const parameters = body?.parameters ?? [];
  const values = new Map<string, string>();
  const missing: string[] = [];
  let namedIndex = 0;
  for (const name of placeholders(content)) {
    const index = /^\d+$/.test(name) ? Number(name) - 1 : namedIndex++;
    const text = index >= 0 ? parameters[index]?.text : undefined;
    if (text === undefined || text === null) missing.push(name);
    else values.set(name, text);
  }
  if (missing.length > 0) throw missingVariables(missing);
  return content.replace(PLACEHOLDER, (_whole, name: string) => values.get(name)!);
}
