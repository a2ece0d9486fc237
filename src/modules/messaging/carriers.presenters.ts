/** REST shapes (snake_case) of connectors and routes. Credentials are never presented. */
import type { MessagingConnector, MessagingRoute, SmppSettings, TelnyxSettings, TwilioSettings, VonageSettings, WhatsAppCloudSettings } from './carriers.entities.ts';
import type { ConnectorView } from './carriers.service.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/** Binds a connector opens: `binds` transceivers, or `binds` transmitters and as many receivers; an HTTP API connector counts one. */
export function configuredBinds(c: Pick<MessagingConnector, 'settings' | 'kind'>): number {
  if (c.kind !== 'smpp') return 1;
  const s = c.settings as SmppSettings;
  return s.binds * (s.bind_mode === 'transmitter_receiver' ? 2 : 1);
}

function smppOf(c: MessagingConnector) {
  if (c.kind !== 'smpp') return null;
  const s = c.settings as SmppSettings;
  return {
    host: s.host, port: s.port, tls: s.tls, system_id: s.system_id, system_type: s.system_type, bind_mode: s.bind_mode, binds: s.binds,
    window: s.window, throughput: s.throughput, concatenation: s.concatenation, enquire_link_seconds: s.enquire_link_seconds, request_receipts: s.request_receipts,
  };
}

/** The settings of an HTTP API connector (secrets left out), null for other kinds. */
export function twilioOf(c: Pick<MessagingConnector, 'kind' | 'settings'>): TwilioSettings | null {
  if (c.kind !== 'twilio') return null;
  const s = c.settings as TwilioSettings;
  return { account_sid: s.account_sid, messaging_service_sid: s.messaging_service_sid };
}
export function telnyxOf(c: Pick<MessagingConnector, 'kind' | 'settings'>): TelnyxSettings | null {
  if (c.kind !== 'telnyx') return null;
  const s = c.settings as TelnyxSettings;
  return { public_key: s.public_key, messaging_profile_id: s.messaging_profile_id };
}
export function vonageOf(c: Pick<MessagingConnector, 'kind' | 'settings'>): VonageSettings | null {
  if (c.kind !== 'vonage') return null;
  return { api_key: (c.settings as VonageSettings).api_key };
}

/** WhatsApp Cloud's plain settings: every identifier and secret of the number is sealed. */
export function whatsAppCloudOf(c: Pick<MessagingConnector, 'kind' | 'settings'>): WhatsAppCloudSettings | null {
  if (c.kind !== 'whatsapp_cloud') return null;
  return { api_version: (c.settings as WhatsAppCloudSettings).api_version };
}

export function presentConnector(c: ConnectorView) {
  return {
    id: c.id, name: c.name, kind: c.kind, channel: c.channel, shared: c.shared, enabled: c.enabled,
    smpp: smppOf(c), twilio: twilioOf(c), telnyx: telnyxOf(c), vonage: vonageOf(c), whatsapp_cloud: whatsAppCloudOf(c),
    callbacks: c.callbacks,
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
