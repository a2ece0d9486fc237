/**
 * SIP transports (RFC 3261 §18): one UDP socket and one TCP listener on the same port, and
 * outgoing TCP or TLS connections kept per destination. Everything received (requests and
 * responses, on any of them) goes to one handler with where it came from, so a response to a
 * request received over a connection goes back over that connection, and one to a datagram goes
 * to the datagram's source address and port.
 *
 * Every destination is held to the outbound address policy (destinations.ts) when a datagram is
 * sent or a connection opened. What arrives is bounded: a message (head and body) is at most
 * `maxMessageBytes` (a stream's message over it is answered 513 when its head could be read,
 * and the connection closed), an accepted connection that completes no message for
 * `idleTimeoutMs` is closed (idle, or sending too slowly), and a source address
 * holds at most `maxConnectionsPerAddress` accepted connections, the listener `maxConnections`;
 * a connection whose peer leaves more than four messages' worth of answers unread is closed.
 */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';
import os from 'node:os';
import { once } from 'node:events';
import type { HostLookup, UrlPolicy, VettedAddress } from '../../../platform/http/safeHttp.ts';
import { header, parseDatagram, responseTo, serialize, sipLimits, SipTooLarge, stampVia, StreamFramer, type SipLimits, type SipMessage } from './message.ts';
import { vetDestination } from './destinations.ts';

export type SipTransportName = 'udp' | 'tcp' | 'tls';
export type SipDestination = { host: string; port: number; transport: SipTransportName };
/** Where a message came from: a datagram's address, or the connection it arrived on. */
export type SipSource = SipDestination & { socket?: net.Socket };

/** What the listener accepts (SIP_MAX_MESSAGE_BYTES, SIP_TCP_IDLE_TIMEOUT_MS, SIP_TCP_MAX_CONNECTIONS_PER_ADDRESS, SIP_TCP_MAX_CONNECTIONS). */
export type SipListenerLimits = {
  maxMessageBytes: number;
  idleTimeoutMs: number;
  maxConnectionsPerAddress: number;
  maxConnections: number;
};

export const DEFAULT_LISTENER_LIMITS: SipListenerLimits = { maxMessageBytes: 65_535, idleTimeoutMs: 60_000, maxConnectionsPerAddress: 16, maxConnections: 1024 };

export type SipTransportOptions = {
  /** Address to bind (the voice config's default is 127.0.0.1). */
  bindHost: string;
  /** Port for UDP and TCP (0: any free one). */
  port: number;
  /** Address written in Via and Contact (default: the bind address, or this host's first external IPv4). */
  publicHost?: string;
  /** TLS: extra CA certificates (PEM) trusted besides the system's, and whether to verify at all. */
  tlsCa?: string;
  tlsRejectUnauthorized?: boolean;
  /** The outbound address policy every destination is held to (WEBHOOKS_ALLOW_LOOPBACK lets 127.0.0.1 through). */
  policy: UrlPolicy;
  /** Host name resolution (default: the system's, every address). */
  lookup?: HostLookup;
  limits?: Partial<SipListenerLimits>;
  onMessage(message: SipMessage, source: SipSource): void;
  onError(error: Error, where: string): void;
};

export class SipTransport {
  readonly #opts: SipTransportOptions;
  readonly #limits: SipListenerLimits;
  readonly #messageLimits: SipLimits;
  #udp: dgram.Socket | undefined;
  #tcp: net.Server | undefined;
  #port = 0;
  #tcpPort = 0;
  /** Outgoing stream connections by `transport:host:port`, and accepted ones. */
  readonly #streams = new Map<string, Promise<net.Socket>>();
  readonly #accepted = new Set<net.Socket>();
  /** Accepted connections per source address. */
  readonly #perSource = new Map<string, number>();
  #started: Promise<void> | undefined;

  constructor(opts: SipTransportOptions) {
    this.#opts = opts;
    this.#limits = { ...DEFAULT_LISTENER_LIMITS, ...opts.limits };
    this.#messageLimits = sipLimits(this.#limits.maxMessageBytes);
  }

  /** Binds on first use (a process that never places a live call opens no socket). */
  start(): Promise<void> {
    this.#started ??= this.#bind();
    return this.#started;
  }

  async #bind(): Promise<void> {
    const udp = dgram.createSocket(this.#opts.bindHost.includes(':') ? 'udp6' : 'udp4');
    udp.on('message', (data, rinfo) => {
      let message: SipMessage;
      try {
        message = parseDatagram(data, this.#messageLimits);
      } catch (e) {
        this.#opts.onError(e as Error, `udp from ${rinfo.address}:${rinfo.port}`);
        return;
      }
      this.#opts.onMessage(message, { host: rinfo.address, port: rinfo.port, transport: 'udp' });
    });
    udp.on('error', (e) => this.#opts.onError(e, 'udp socket'));
    udp.bind(this.#opts.port, this.#opts.bindHost);
    await once(udp, 'listening');
    this.#udp = udp;
    this.#port = udp.address().port;
    const tcp = net.createServer((socket) => this.#accept(socket));
    tcp.maxConnections = this.#limits.maxConnections;
    tcp.on('error', (e) => this.#opts.onError(e, 'tcp listener'));
    // The same port as UDP when it is free, else any.
    try {
      tcp.listen(this.#port, this.#opts.bindHost);
      await once(tcp, 'listening');
    } catch {
      tcp.listen(0, this.#opts.bindHost);
      await once(tcp, 'listening');
    }
    this.#tcp = tcp;
    this.#tcpPort = (tcp.address() as net.AddressInfo).port;
  }

  /** An accepted connection: counted against its source's share, closed when it completes no message for the idle timeout. */
  #accept(socket: net.Socket): void {
    const source = sourceKey(socket.remoteAddress ?? '');
    const held = this.#perSource.get(source) ?? 0;
    if (held >= this.#limits.maxConnectionsPerAddress) {
      socket.destroy();
      return;
    }
    this.#perSource.set(source, held + 1);
    this.#accepted.add(socket);
    let idle: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(() => socket.destroy(), this.#limits.idleTimeoutMs);
      idle.unref();
    };
    socket.on('close', () => {
      clearTimeout(idle);
      this.#accepted.delete(socket);
      const left = (this.#perSource.get(source) ?? 1) - 1;
      if (left > 0) this.#perSource.set(source, left);
      else this.#perSource.delete(source);
    });
    arm();
    this.#read(socket, 'tcp', arm);
  }

  /** Where the listener is bound (once started). */
  get bound(): { host: string; udpPort: number; tcpPort: number } {
    return { host: this.#opts.bindHost, udpPort: this.#port, tcpPort: this.#tcpPort };
  }

  /** `host:port` of this end for a transport (Via sent-by, Contact). */
  sentBy(transport: SipTransportName): string {
    const host = this.#publicHost();
    return `${host.includes(':') ? `[${host}]` : host}:${transport === 'udp' ? this.#port : this.#tcpPort}`;
  }

  #publicHost(): string {
    if (this.#opts.publicHost) return this.#opts.publicHost;
    if (this.#opts.bindHost !== '0.0.0.0' && this.#opts.bindHost !== '::') return this.#opts.bindHost;
    for (const list of Object.values(os.networkInterfaces())) {
      for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
    }
    return '127.0.0.1';
  }

  /** The address policy's verdict on a host now: where it resolves (SipDestinationBlocked when refused). */
  vet(host: string): Promise<VettedAddress> {
    return vetDestination(host, this.#opts.policy, this.#opts.lookup);
  }

  /**
   * Sends to a destination: its host vetted and resolved now (SipDestinationBlocked when the
   * policy refuses it: nothing is sent); a stream transport connects first (and fails with the connection).
   */
  async send(message: SipMessage, to: SipDestination): Promise<void> {
    await this.start();
    const data = serialize(message);
    if (to.transport === 'udp') {
      const { address } = await this.vet(to.host);
      await new Promise<void>((resolve, reject) => this.#udp!.send(data, to.port, address, (e) => (e ? reject(e) : resolve())));
      return;
    }
    const socket = await this.#stream(to);
    socket.write(data);
  }

  /**
   * Answers a request where it came from: over its connection (none when that has closed: the
   * response is dropped), or to the datagram's source address and port (RFC 3581), never to an
   * address the request names.
   */
  async reply(message: SipMessage, source: SipSource): Promise<void> {
    if (source.socket) {
      if (source.socket.destroyed) return;
      // A peer that sends requests but never reads their answers is not buffered for without end.
      if (source.socket.writableLength > 4 * this.#limits.maxMessageBytes) {
        source.socket.destroy();
        return;
      }
      source.socket.write(serialize(message));
      return;
    }
    await this.send(message, { host: source.host, port: source.port, transport: 'udp' });
  }

  #stream(to: SipDestination): Promise<net.Socket> {
    const key = `${to.transport}:${to.host}:${to.port}`;
    let pending = this.#streams.get(key);
    if (!pending) {
      pending = (async () => {
        const { address } = await this.vet(to.host);
        const socket = to.transport === 'tls'
          ? tls.connect({ host: address, port: to.port, servername: net.isIP(to.host) ? undefined : to.host, ca: this.#opts.tlsCa ? [...tls.rootCertificates, this.#opts.tlsCa] : undefined, rejectUnauthorized: this.#opts.tlsRejectUnauthorized ?? true })
          : net.connect({ host: address, port: to.port });
        socket.setTimeout(0);
        const ready = to.transport === 'tls' ? 'secureConnect' : 'connect';
        await Promise.race([once(socket, ready), once(socket, 'error').then(([e]) => { throw e; })]);
        socket.on('error', (e) => this.#opts.onError(e, `${key}`));
        socket.on('close', () => this.#streams.delete(key));
        this.#read(socket, to.transport);
        return socket;
      })();
      this.#streams.set(key, pending);
      pending.catch(() => this.#streams.delete(key));
    }
    return pending;
  }

  /** Frames what a connection carries; `completed` is told of each whole message (the idle timer). */
  #read(socket: net.Socket, transport: SipTransportName, completed?: () => void): void {
    const source: SipSource = { host: socket.remoteAddress ?? '', port: socket.remotePort ?? 0, transport, socket };
    const framer = new StreamFramer((m) => {
      completed?.();
      this.#opts.onMessage(m, source);
    }, this.#messageLimits);
    const onData = (chunk: Buffer) => {
      try {
        framer.push(chunk);
      } catch (e) {
        this.#opts.onError(e as Error, `${transport} from ${source.host}:${source.port}`);
        socket.off('data', onData);
        const head = e instanceof SipTooLarge ? e.head : undefined;
        if (head?.kind === 'request' && head.method !== 'ACK') {
          // RFC 3261 §21.5.8; the stream cannot be read past a body it will not take, so it closes.
          const response = responseTo(head, 513, 'Message Too Large', { topVia: stampVia(header(head, 'via') ?? '', source.host, source.port), toTag: randomBytes(4).toString('hex') });
          socket.pause();
          socket.end(serialize(response));
          setTimeout(() => socket.destroy(), 1000).unref();
        } else {
          socket.destroy();
        }
      }
    };
    socket.on('data', onData);
    socket.on('error', () => socket.destroy());
  }

  async close(): Promise<void> {
    if (!this.#started) return;
    await this.#started.catch(() => {});
    for (const pending of this.#streams.values()) void pending.then((s) => s.destroy(), () => {});
    for (const s of this.#accepted) s.destroy();
    this.#streams.clear();
    await Promise.all([
      this.#udp ? new Promise<void>((resolve) => this.#udp!.close(() => resolve())) : undefined,
      this.#tcp ? new Promise<void>((resolve) => this.#tcp!.close(() => resolve())) : undefined,
    ]);
    this.#udp = undefined;
    this.#tcp = undefined;
    this.#started = undefined;
  }
}

/** The source a connection counts against: its address (an IPv4-mapped IPv6 one as the IPv4 address). */
export function sourceKey(address: string): string {
  return address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '').toLowerCase();
}
