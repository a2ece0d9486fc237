/** REST shapes (snake_case) of connectors and routes. Credentials are never presented. */
import type { MessagingConnector, MessagingRoute } from './carriers.entities.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/** Binds a connector opens: `binds` transceivers, or `binds` transmitters and as many receivers. */
export function configuredBinds(c: Pick<MessagingConnector, 'settings'>): number {
  return c.settings.binds * (c.settings.bind_mode === 'transmitter_receiver' ? 2 : 1);
}

export function presentConnector(c: MessagingConnector) {
  const s = c.settings;
  return {
    id: c.id, name: c.name, kind: c.kind, channel: c.channel, shared: c.shared, enabled: c.enabled,
    smpp: {
      host: s.host, port: s.port, tls: s.tls, system_id: s.system_id, system_type: s.system_type, bind_mode: s.bind_mode, binds: s.binds,
      window: s.window, throughput: s.throughput, concatenation: s.concatenation, enquire_link_seconds: s.enquire_link_seconds, request_receipts: s.request_receipts,
    },
    status: {
      state: c.status, binds_up: c.bindsUp, binds: configuredBinds(c), last_error: c.lastError, last_error_at: iso(c.lastErrorAt), reported_at: iso(c.statusAt),
    },
    created_at: iso(c.createdAt), updated_at: iso(c.updatedAt),
  };
}

export function presentRoute(r: MessagingRoute) {
  return {
    id: r.id, connector_id: r.connectorId, channel: r.channel, prefix: r.prefix, sender: r.sender, priority: r.priority, weight: r.weight,
    shared: r.shared, created_at: iso(r.createdAt), updated_at: iso(r.updatedAt),
  };
}
