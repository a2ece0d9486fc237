/** Name conversion between the surfaces: GraphQL and TypeScript use camelCase, REST and events snake_case. */

/** `callbackUrl` → `callback_url`. */
export function snake(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}
