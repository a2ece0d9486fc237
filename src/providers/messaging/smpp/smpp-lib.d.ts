/** The parts of the `smpp` package (node-smpp 0.5, no types of its own) this adapter and its test peer use. */
declare module 'smpp' {
  import type { EventEmitter } from 'node:events';
  import type { Server as NetServer, Socket } from 'node:net';

  export type PduFields = Record<string, unknown>;

  export class PDU {
    constructor(command: string, options?: PduFields);
    command: string;
    command_id: number;
    command_status: number;
    sequence_number: number;
    [field: string]: unknown;
    isResponse(): boolean;
    response(options?: PduFields): PDU;
  }

  export class Session extends EventEmitter {
    socket: Socket;
    send(pdu: PDU, responseCallback?: (pdu: PDU) => void, sendCallback?: (pdu: PDU) => void): boolean;
    close(callback?: () => void): void;
    destroy(callback?: () => void): void;
    pause(): void;
    resume(): void;
  }

  export class Server extends NetServer {
    sessions: Session[];
  }

  type Commands = Record<string, { id: number; params?: Record<string, { type: unknown; filter?: { encode(v: unknown): unknown; decode(v: unknown): unknown } }> }>;
  type Tlvs = Record<string, { id: number; filter?: { encode(v: unknown): unknown; decode(v: unknown): unknown } }>;

  const smpp: {
    connect(options: { host: string; port: number; tls?: boolean; rejectUnauthorized?: boolean; servername?: string }): Session;
    createServer(options: Record<string, unknown>, listener?: (session: Session) => void): Server;
    PDU: typeof PDU;
    errors: Record<string, number>;
    commands: Commands;
    tlvs: Tlvs;
  };
  export default smpp;
}
