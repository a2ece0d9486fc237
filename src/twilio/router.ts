/** Matches Twilio-compatible paths to the route table (a parameter never spans a `/`). */
import { notFound, TwilioError } from './errors.ts';
import type { TwilioRoute } from './route.ts';

type Compiled = { route: TwilioRoute; regex: RegExp; names: string[]; staticness: number };

export class TwilioRouter {
  readonly #routes: Compiled[];

  constructor(routes: readonly TwilioRoute[]) {
    this.#routes = routes.map((route) => {
      const names: string[] = [];
      const pattern = route.path.replace(/\./g, '\\.').replace(/\{(\w+)\}/g, (_m, name: string) => {
        names.push(name);
        return '([^/.]+)';
      });
      return { route, regex: new RegExp(`^${pattern}$`), names, staticness: -names.length };
    }).sort((a, b) => b.staticness - a.staticness);
  }

  get routes(): TwilioRoute[] {
    return this.#routes.map((c) => c.route);
  }

  match(method: string, path: string): { route: TwilioRoute; params: Record<string, string> } {
    let allowed = false;
    for (const c of this.#routes) {
      const m = c.regex.exec(path);
      if (!m) continue;
      if (c.route.method !== method) {
        allowed = true;
        continue;
      }
      const params: Record<string, string> = {};
      c.names.forEach((n, i) => {
        try {
          params[n] = decodeURIComponent(m[i + 1]!);
        } catch {
          // A malformed percent-encoding (a lone surrogate's bytes, a stray `%`) is the client's error.
          throw new TwilioError(400, 20001, `${n}: malformed percent-encoding in the path`);
        }
      });
      return { route: c.route, params };
    }
    if (allowed) throw new TwilioError(405, 20004, `Method not allowed: ${method} ${path}`);
    throw notFound(path);
  }
}
