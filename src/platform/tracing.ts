/**
 * OpenTelemetry traces, off unless an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; see config.ts). Off, every helper here is one boolean check
 * and no OpenTelemetry SDK object exists. On, the app exports over OTLP/HTTP (JSON):
 * - a SERVER span per HTTP request (`POST /v1/messages/sms`, `mutation SendSms`): route template or
 *   GraphQL operation, status, organization id; never bodies, query strings or recipients;
 * - a CLIENT span per database query that runs inside another span (pg-boss's own polling is not
 *   traced), with the statement's operation and table, never its values;
 * - a CONSUMER span per pg-boss job, child of the context that enqueued it (the envelope carries
 *   a W3C `traceparent`), and per webhook delivery attempt, child of the context that emitted the
 *   event (the outbox row and the delivery row carry it);
 * - a CLIENT span per outgoing webhook or provider HTTP call, whose `traceparent` header is sent.
 * An incoming `traceparent` header makes the request span a child of the caller's span.
 */
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';
import pg from 'pg';

export type TracingConfig = {
  /** OTLP/HTTP traces URL (`…/v1/traces`); unset → tracing is off. */
  endpoint: string | undefined;
  /** Extra headers for the exporter (OTEL_EXPORTER_OTLP_HEADERS, `k=v,k2=v2`). */
  headers: Record<string, string>;
  serviceName: string;
  /** Fraction of new traces sampled (a sampled parent is always followed). */
  sampleRatio: number;
};

/** A started tracing SDK: flush exports what is buffered, shutdown also restores the globals. */
export type Tracing = { flush(): Promise<void>; shutdown(): Promise<void> };

const TRACER = 'omnichannel-platform';
let enabled = false;

/** Whether tracing is on in this process (the helpers below do nothing when it is off). */
export function tracingEnabled(): boolean {
  return enabled;
}

/**
 * Starts the SDK: AsyncLocalStorage context, W3C trace-context propagation, a batch processor over
 * the OTLP/HTTP exporter (or `exporter`, a test hook), and the pg query hook. Loaded on demand, so
 * a process with tracing off never imports the SDK. Returns undefined when the config has no endpoint
 * and no exporter is given.
 */
export async function startTracing(config: TracingConfig, exporter?: unknown): Promise<Tracing | undefined> {
  if (!config.endpoint && !exporter) return undefined;
  if (enabled) throw new Error('tracing is already started in this process');
  const [{ TracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler }, { AsyncLocalStorageContextManager }, { W3CTraceContextPropagator }, { resourceFromAttributes }, { OTLPTraceExporter }] = await Promise.all([
    import('@opentelemetry/sdk-trace'), import('@opentelemetry/context-async-hooks'), import('@opentelemetry/core'),
    import('@opentelemetry/resources'), import('@opentelemetry/exporter-trace-otlp-http'),
  ]);
  const spanExporter = (exporter as InstanceType<typeof OTLPTraceExporter> | undefined) ?? new OTLPTraceExporter({ url: config.endpoint!, headers: config.headers });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.sampleRatio) }),
    spanProcessors: [new BatchSpanProcessor({ exporter: spanExporter, scheduledDelayMillis: 1000 })],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  const unpatch = patchPg();
  enabled = true;
  return {
    flush: () => provider.forceFlush(),
    async shutdown() {
      enabled = false;
      unpatch();
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}

function tracer() {
  return trace.getTracer(TRACER);
}

/** The span of the current context (undefined when tracing is off or there is none). */
export function activeSpan(): Span | undefined {
  return enabled ? trace.getActiveSpan() : undefined;
}

/** Sets attributes on the current span (no-op when tracing is off). */
export function annotate(attributes: Attributes): void {
  if (enabled) trace.getActiveSpan()?.setAttributes(attributes);
}

/** The current context as a W3C `traceparent` value, to carry in a job envelope or an outbox row. */
export function currentTraceparent(): string | undefined {
  if (!enabled) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** The context a `traceparent` value names (the root context when absent or malformed). */
export function contextOf(traceparent: string | undefined): Context {
  if (!enabled || !traceparent) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, { traceparent });
}

/** Adds the current context's `traceparent` to outgoing `headers` (in place; no-op when off). */
export function injectTraceHeaders(headers: Record<string, string>): void {
  if (enabled) propagation.inject(context.active(), headers);
}

export type SpanOptions = { kind?: SpanKind; attributes?: Attributes; parent?: Context };

/**
 * Runs `fn` in a new span (a child of `parent`, else of the current context): an exception is
 * recorded as the span's error, and the span ends when `fn` settles. With tracing off, runs `fn`.
 */
export function withSpan<T>(name: string, opts: SpanOptions, fn: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (!enabled) return fn(undefined);
  const parent = opts.parent ?? context.active();
  return tracer().startActiveSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, ...(opts.attributes ? { attributes: opts.attributes } : {}) }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (e) {
      span.recordException(e as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (e as Error)?.message?.slice(0, 200) });
      throw e;
    } finally {
      span.end();
    }
  });
}

/** Starts a span the caller ends (the HTTP request span, ended when the response closes). */
export function startSpan(name: string, opts: SpanOptions): { span: Span; context: Context } | undefined {
  if (!enabled) return undefined;
  const parent = opts.parent ?? context.active();
  const span = tracer().startSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, ...(opts.attributes ? { attributes: opts.attributes } : {}) }, parent);
  return { span, context: trace.setSpan(parent, span) };
}

/** Runs `fn` with `ctx` as the current context. */
export function runIn<T>(ctx: Context | undefined, fn: () => T): T {
  return ctx && enabled ? context.with(ctx, fn) : fn();
}

export function markError(span: Span | undefined, message: string): void {
  span?.setStatus({ code: SpanStatusCode.ERROR, message });
}

export { SpanKind };

/** `insert into "webhook_deliveries" …` → { operation: 'INSERT', table: 'webhook_deliveries' } (no values). */
export function statementSummary(text: string): { operation: string; table: string | undefined } {
  const sql = text.replace(/\/\*[\s\S]*?\*\//g, ' ').trimStart();
  const operation = (/^[a-z]+/i.exec(sql)?.[0] ?? 'QUERY').toUpperCase();
  const target = operation === 'WITH' ? undefined : /\b(?:from|into|update|join)\s+((?:"?[a-z_][\w$]*"?\.)?"?[a-z_][\w$]*"?)/i.exec(sql)?.[1];
  return { operation, table: target?.replaceAll('"', '') };
}

type QueryArgs = [unknown, ...unknown[]];

/**
 * Wraps pg.Client#query (the driver under the raw pool, MikroORM's Kysely pool and pg-boss) so each
 * query run inside a span gets a child span. Queries outside any span (pg-boss polling, LISTEN
 * connections) stay untraced. Returns the function that restores the original.
 */
function patchPg(): () => void {
  const proto = pg.Client.prototype as unknown as { query: (...args: QueryArgs) => unknown };
  const original = proto.query;
  proto.query = function tracedQuery(this: unknown, ...args: QueryArgs) {
    const parent = context.active();
    if (!enabled || !trace.getSpan(parent)) return original.apply(this, args);
    const first = args[0];
    const text = typeof first === 'string' ? first : typeof (first as { text?: unknown })?.text === 'string' ? (first as { text: string }).text : '';
    // A query object with `submit` (a cursor, a stream) settles through its own events: leave it alone.
    if (first && typeof first === 'object' && typeof (first as { submit?: unknown }).submit === 'function') return original.apply(this, args);
    const { operation, table } = statementSummary(text);
    const span = tracer().startSpan(table ? `${operation} ${table}` : operation, {
      kind: SpanKind.CLIENT,
      attributes: { 'db.system.name': 'postgresql', 'db.operation.name': operation, ...(table ? { 'db.collection.name': table } : {}) },
    }, parent);
    const end = (e?: unknown) => {
      if (e) span.setStatus({ code: SpanStatusCode.ERROR, message: String((e as Error)?.message ?? e).slice(0, 200) });
      span.end();
    };
    const last = args[args.length - 1];
    if (typeof last === 'function') {
      const cb = last as (e: unknown, r: unknown) => void;
      args[args.length - 1] = (e: unknown, r: unknown) => { end(e); cb(e, r); };
      return context.with(trace.setSpan(parent, span), () => original.apply(this, args));
    }
    const result = context.with(trace.setSpan(parent, span), () => original.apply(this, args));
    if (result && typeof (result as Promise<unknown>).then === 'function') {
      (result as Promise<unknown>).then(() => end(), (e: unknown) => end(e));
    } else {
      end();
    }
    return result;
  };
  // A pool hands a waiting caller the client another caller released, in that caller's context:
  // bind connect callbacks to the context that asked (pool.query goes through connect).
  const poolProto = pg.Pool.prototype as unknown as { connect: (...args: unknown[]) => unknown };
  const originalConnect = poolProto.connect;
  poolProto.connect = function tracedConnect(this: unknown, ...args: unknown[]) {
    const cb = args[0];
    if (typeof cb === 'function') args[0] = context.bind(context.active(), cb as (...a: unknown[]) => unknown);
    return originalConnect.apply(this, args);
  };
  return () => {
    proto.query = original;
    poolProto.connect = originalConnect;
  };
}
