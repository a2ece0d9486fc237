/**
 * SIP transports (RFC 3261 §18): one UDP socket and one TCP listener on the same port, and
 * outgoing TCP or TLS connections kept per destination. Everything received (requests and
 * responses, on any of them) goes to one handler with where it came from, so a response to a
 * request received over a connection goes back over that connection, and one to a datagram goes
 * to the datagram's source address and port.
 *
 * Every destination is held to the outbound address policy (destinations.ts) when a datagram is
 * sent or a connection opened.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';
import os from 'node:os';
import { once } from 'node:events';
import type { HostLookup, UrlPolicy, VettedAddress } from '../../../platform/http/safeHttp.ts';
import { parseDatagram, serialize, StreamFramer, type SipMessage } from './message.ts';
import { vetDestination } from './destinations.ts';

export type SipTransportName = 'udp' | 'tcp' | 'tls';
export type SipDestination = { host: string; port: number; transport: SipTransportName };
/** Where a message came from: a datagram's address, or the connection it arrived on. */
export type SipSource = SipDestination & { socket?: net.Socket };

export type SipTransportOptions = {
  /** Address to bind (default 0.0.0.0). */
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
  onMessage(message: SipMessage, source: SipSource): void;
  onError(error: Error, where: string): void;
};

export class SipTransport {
  readonly #opts: SipTransportOptions;
  #udp: dgram.Socket | undefined;
  #tcp: net.Server | undefined;
  #port = 0;
  #tcpPort = 0;
  /** Outgoing stream connections by `transport:host:port`, and accepted ones. */
  readonly #streams = new Map<string, Promise<net.Socket>>();
  readonly #accepted = new Set<net.Socket>();
  #started: Promise<void> | undefined;

  constructor(opts: SipTransportOptions) {
    this.#opts = opts;
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
        message = parseDatagram(data);
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
    const tcp = net.createServer((socket) => {
      this.#accepted.add(socket);
      socket.on('close', () => this.#accepted.delete(socket));
      this.#read(socket, 'tcp');
    });
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
      if (!source.socket.destroyed) source.socket.write(serialize(message));
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

  #read(socket: net.Socket, transport: SipTransportName): void {
    const source: SipSource = { host: socket.remoteAddress ?? '', port: socket.remotePort ?? 0, transport, socket };
    const framer = new StreamFramer((m) => this.#opts.onMessage(m, source));
    socket.on('data', (chunk: Buffer) => {
      try {
        framer.push(chunk);
      } catch (e) {
        this.#opts.onError(e as Error, `${transport} from ${source.host}:${source.port}`);
        socket.destroy();
      }
    });
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
