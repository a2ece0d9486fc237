/** GraphQL twins of the connector and route routes (docs/messaging.md, "Carriers"); inputs converted to the REST shape. */
import { builder } from '../../graphql/builder.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { NEVER_CACHED } from '../../graphql/responseCache.ts';
import { patchWire, toWire } from '../../graphql/wire.ts';
import { SMPP_BIND_MODES } from '../../providers/messaging/smpp/connector.ts';
import { CONCATENATIONS } from '../../providers/messaging/smpp/encoding.ts';
import { CARRIER_CHANNELS, CONNECTOR_KINDS, type MessagingConnector, type MessagingRoute, type SmppSettings, type TelnyxSettings, type TwilioSettings, type VonageSettings, type WhatsAppCloudSettings } from './carriers.entities.ts';
import {
  createConnectorOp, createRouteOp, deleteConnectorOp, deleteRouteOp, getConnectorOp, getRouteOp, listConnectorsOp, listRoutesOp, updateConnectorOp, updateRouteOp,
} from './carriers.operations.ts';
import { configuredBinds, telnyxOf, twilioOf, vonageOf, whatsAppCloudOf } from './carriers.presenters.ts';
import type { ConnectorCallbacks, ConnectorView } from './carriers.service.ts';

const KindEnum = builder.enumType('ConnectorKind', { values: CONNECTOR_KINDS });
const CarrierChannelEnum = builder.enumType('CarrierChannel', { values: CARRIER_CHANNELS });
const BindModeEnum = builder.enumType('SmppBindMode', { values: SMPP_BIND_MODES });
const ConcatenationEnum = builder.enumType('SmppConcatenation', { values: CONCATENATIONS });
const ConnectorStateEnum = builder.enumType('ConnectorState', { values: ['connected', 'degraded', 'down', 'disabled'] as const });

const SmppSettingsRef = builder.objectRef<SmppSettings>('SmppSettings').implement({
  description: 'An SMPP account\'s settings (the password is write-only).',
  fields: (t) => ({
    host: t.exposeString('host'),
    port: t.exposeInt('port'),
    tls: t.exposeBoolean('tls'),
    systemId: t.exposeString('system_id'),
    systemType: t.exposeString('system_type'),
    bindMode: t.field({ type: BindModeEnum, resolve: (s) => s.bind_mode }),
    binds: t.exposeInt('binds'),
    window: t.exposeInt('window'),
    throughput: t.exposeFloat('throughput'),
    concatenation: t.field({ type: ConcatenationEnum, resolve: (s) => s.concatenation }),
    enquireLinkSeconds: t.exposeFloat('enquire_link_seconds'),
    requestReceipts: t.exposeBoolean('request_receipts'),
  }),
});

const TwilioSettingsRef = builder.objectRef<TwilioSettings>('TwilioConnectorSettings').implement({
  description: 'A Twilio account (the auth token is write-only).',
  fields: (t) => ({
    accountSid: t.exposeString('account_sid'),
    messagingServiceSid: t.exposeString('messaging_service_sid', { nullable: true }),
  }),
});
const TelnyxSettingsRef = builder.objectRef<TelnyxSettings>('TelnyxConnectorSettings').implement({
  description: 'A Telnyx account (the API key is write-only).',
  fields: (t) => ({
    publicKey: t.exposeString('public_key', { description: 'Verifies the webhooks (Ed25519, base64)' }),
    messagingProfileId: t.exposeString('messaging_profile_id', { nullable: true }),
  }),
});
const VonageSettingsRef = builder.objectRef<VonageSettings>('VonageConnectorSettings').implement({
  description: 'A Vonage account (the API secret and the signature secret are write-only).',
  fields: (t) => ({ apiKey: t.exposeString('api_key') }),
});

const WhatsAppCloudSettingsRef = builder.objectRef<WhatsAppCloudSettings>('WhatsAppCloudConnectorSettings').implement({
  description: 'A WhatsApp Cloud API number (its access token, app secret, verify token, phone number id and WABA id are write-only).',
  fields: (t) => ({ apiVersion: t.exposeString('api_version', { description: 'Graph API version' }) }),
});

const ConnectorCallbacksRef = builder.objectRef<ConnectorCallbacks>('ConnectorCallbacks').implement({
  description: 'The URLs of this service the vendor must be configured with (under PUBLIC_BASE_URL); SMPP has none.',
  fields: (t) => ({
    statusUrl: t.exposeString('status_url', { nullable: true, description: 'Status callbacks (Twilio, Telnyx: given with each send; Vonage: the application\'s status URL)' }),
    inboundUrl: t.exposeString('inbound_url', { nullable: true, description: 'Inbound messages: the number\'s, messaging profile\'s or application\'s inbound webhook' }),
    webhookUrl: t.exposeString('webhook_url', { nullable: true, description: 'WhatsApp Cloud: the Callback URL of the app\'s WhatsApp webhook (statuses and messages)' }),
    verifyTokenSet: t.exposeBoolean('verify_token_set', { nullable: true, description: 'WhatsApp Cloud: the webhook\'s Verify token is the verify_token set on this connector (write-only)' }),
  }),
});

const ConnectorStatusRef = builder.objectRef<MessagingConnector>('ConnectorStatus').implement({
  extensions: NEVER_CACHED,
  fields: (t) => ({
    state: t.field({ type: ConnectorStateEnum, resolve: (c) => c.status }),
    bindsUp: t.exposeInt('bindsUp'),
    binds: t.int({ resolve: (c) => configuredBinds(c) }),
    lastError: t.exposeString('lastError', { nullable: true }),
    lastErrorAt: t.expose('lastErrorAt', { type: 'DateTime', nullable: true }),
    reportedAt: t.expose('statusAt', { type: 'DateTime', nullable: true }),
  }),
});

const ConnectorRef = builder.node(builder.objectRef<ConnectorView>('MessagingConnector'), {
  id: { resolve: (c) => c.id },
  loadOne: (id, ctx) => run(getConnectorOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name'),
    kind: t.field({ type: KindEnum, resolve: (c) => c.kind }),
    channel: t.field({ type: CarrierChannelEnum, resolve: (c) => c.channel }),
    shared: t.exposeBoolean('shared'),
    enabled: t.exposeBoolean('enabled'),
    smpp: t.field({ type: SmppSettingsRef, nullable: true, resolve: (c) => (c.kind === 'smpp' ? c.settings as SmppSettings : null) }),
    twilio: t.field({ type: TwilioSettingsRef, nullable: true, resolve: (c) => twilioOf(c) }),
    telnyx: t.field({ type: TelnyxSettingsRef, nullable: true, resolve: (c) => telnyxOf(c) }),
    vonage: t.field({ type: VonageSettingsRef, nullable: true, resolve: (c) => vonageOf(c) }),
    whatsappCloud: t.field({ type: WhatsAppCloudSettingsRef, nullable: true, resolve: (c) => whatsAppCloudOf(c) }),
    callbacks: t.field({ type: ConnectorCallbacksRef, resolve: (c) => c.callbacks }),
    status: t.field({ type: ConnectorStatusRef, resolve: (c) => c }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const RouteRef = builder.node(builder.objectRef<MessagingRoute>('MessagingRoute'), {
  id: { resolve: (r) => r.id },
  loadOne: (id, ctx) => run(getRouteOp, ctx, { id }),
  fields: (t) => ({
    connectorId: t.exposeString('connectorId'),
    channel: t.field({ type: CarrierChannelEnum, resolve: (r) => r.channel }),
    prefix: t.exposeString('prefix'),
    sender: t.exposeString('sender', { nullable: true }),
    priority: t.exposeInt('priority'),
    weight: t.exposeInt('weight'),
    shared: t.exposeBoolean('shared'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

function smppInput(name: string, required: boolean) {
  return builder.inputType(name, {
    fields: (t) => ({
      host: t.string({ required }),
      port: t.int({ required }),
      tls: t.boolean({ required: false }),
      systemId: t.string({ required }),
      password: t.string({ required, description: 'Write-only: stored sealed, never returned' }),
      systemType: t.string({ required: false }),
      bindMode: t.field({ type: BindModeEnum, required: false }),
      binds: t.int({ required: false }),
      window: t.int({ required: false, description: 'Outstanding submit_sm per bind' }),
      throughput: t.float({ required: false, description: 'submit_sm per second for the connector' }),
      concatenation: t.field({ type: ConcatenationEnum, required: false }),
      enquireLinkSeconds: t.float({ required: false }),
      requestReceipts: t.boolean({ required: false }),
    }),
  });
}
const SmppInput = smppInput('SmppSettingsInput', true);
const SmppPatchInput = smppInput('SmppSettingsPatchInput', false);

function twilioInput(name: string, required: boolean) {
  return builder.inputType(name, {
    fields: (t) => ({
      accountSid: t.string({ required }),
      authToken: t.string({ required, description: 'Write-only: stored sealed, never returned' }),
      messagingServiceSid: t.string({ required: false, description: 'Send from this Messaging Service instead of the message\'s sender' }),
    }),
  });
}
function telnyxInput(name: string, required: boolean) {
  return builder.inputType(name, {
    fields: (t) => ({
      apiKey: t.string({ required, description: 'Write-only: stored sealed, never returned' }),
      publicKey: t.string({ required, description: 'The account\'s webhook public key (base64 Ed25519)' }),
      messagingProfileId: t.string({ required: false }),
    }),
  });
}
function vonageInput(name: string, required: boolean) {
  return builder.inputType(name, {
    fields: (t) => ({
      apiKey: t.string({ required }),
      apiSecret: t.string({ required, description: 'Write-only: stored sealed, never returned' }),
      signatureSecret: t.string({ required, description: 'Write-only: verifies signed webhooks' }),
    }),
  });
}
function whatsAppCloudInput(name: string, required: boolean) {
  return builder.inputType(name, {
    fields: (t) => ({
      accessToken: t.string({ required, description: 'Write-only: the system user\'s access token' }),
      appSecret: t.string({ required, description: 'Write-only: verifies X-Hub-Signature-256 of the webhooks' }),
      verifyToken: t.string({ required, description: 'Write-only: the Verify token of the webhook subscription handshake' }),
      phoneNumberId: t.string({ required, description: 'Write-only: the number\'s id in the Cloud API' }),
      wabaId: t.string({ required, description: 'Write-only: the WhatsApp Business Account id' }),
      apiVersion: t.string({ required: false, description: 'Graph API version (default v21.0)' }),
    }),
  });
}
const WhatsAppCloudInput = whatsAppCloudInput('WhatsAppCloudConnectorSettingsInput', true);
const WhatsAppCloudPatchInput = whatsAppCloudInput('WhatsAppCloudConnectorSettingsPatchInput', false);
const TwilioInput = twilioInput('TwilioConnectorSettingsInput', true);
const TwilioPatchInput = twilioInput('TwilioConnectorSettingsPatchInput', false);
const TelnyxInput = telnyxInput('TelnyxConnectorSettingsInput', true);
const TelnyxPatchInput = telnyxInput('TelnyxConnectorSettingsPatchInput', false);
const VonageInput = vonageInput('VonageConnectorSettingsInput', true);
const VonagePatchInput = vonageInput('VonageConnectorSettingsPatchInput', false);

const CreateConnectorInput = builder.inputType('CreateMessagingConnectorInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    kind: t.field({ type: KindEnum, required: true }),
    channel: t.field({ type: CarrierChannelEnum, required: false }),
    shared: t.boolean({ required: false, description: 'Platform operator only: serves every organization after its own routes' }),
    enabled: t.boolean({ required: false }),
    smpp: t.field({ type: SmppInput, required: false, description: 'For kind smpp' }),
    twilio: t.field({ type: TwilioInput, required: false, description: 'For kind twilio' }),
    telnyx: t.field({ type: TelnyxInput, required: false, description: 'For kind telnyx' }),
    vonage: t.field({ type: VonageInput, required: false, description: 'For kind vonage' }),
    whatsappCloud: t.field({ type: WhatsAppCloudInput, required: false, description: 'For kind whatsapp_cloud' }),
  }),
});
const UpdateConnectorInput = builder.inputType('UpdateMessagingConnectorInput', {
  fields: (t) => ({
    name: t.string({ required: false }),
    enabled: t.boolean({ required: false }),
    smpp: t.field({ type: SmppPatchInput, required: false }),
    twilio: t.field({ type: TwilioPatchInput, required: false }),
    telnyx: t.field({ type: TelnyxPatchInput, required: false }),
    vonage: t.field({ type: VonagePatchInput, required: false }),
    whatsappCloud: t.field({ type: WhatsAppCloudPatchInput, required: false }),
  }),
});
const CreateRouteInput = builder.inputType('CreateMessagingRouteInput', {
  fields: (t) => ({
    connectorId: t.string({ required: true }),
    channel: t.field({ type: CarrierChannelEnum, required: false }),
    prefix: t.string({ required: false, description: 'E.164 prefix of the destination (+44); empty or absent: every destination' }),
    sender: t.string({ required: false, description: 'Only messages from this sender' }),
    priority: t.int({ required: false, description: 'Lowest first (default 1)' }),
    weight: t.int({ required: false, description: 'Share among routes of one priority (default 100)' }),
    shared: t.boolean({ required: false }),
  }),
});
const UpdateRouteInput = builder.inputType('UpdateMessagingRouteInput', {
  fields: (t) => ({
    connectorId: t.string({ required: false }),
    prefix: t.string({ required: false }),
    sender: t.string({ required: false, description: 'null: every sender' }),
    priority: t.int({ required: false }),
    weight: t.int({ required: false }),
  }),
});

builder.queryFields((t) => ({
  messagingConnectors: t.connection({
    type: ConnectorRef, ...guard('Query', 'messagingConnectors', listConnectorsOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listConnectorsOp, ctx, pageRequest(args))),
  }),
  messagingConnector: t.field({
    type: ConnectorRef, ...guard('Query', 'messagingConnector', getConnectorOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getConnectorOp, ctx, { id: String(args.id) }),
  }),
  messagingRoutes: t.connection({
    type: RouteRef, ...guard('Query', 'messagingRoutes', listRoutesOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listRoutesOp, ctx, pageRequest(args))),
  }),
  messagingRoute: t.field({
    type: RouteRef, ...guard('Query', 'messagingRoute', getRouteOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getRouteOp, ctx, { id: String(args.id) }),
  }),
}));

builder.mutationFields((t) => ({
  createMessagingConnector: t.field({
    type: ConnectorRef, ...guard('Mutation', 'createMessagingConnector', createConnectorOp),
    args: { input: t.arg({ type: CreateConnectorInput, required: true }) },
    resolve: (_r, args, ctx) => run(createConnectorOp, ctx, toWire(args.input)),
  }),
  updateMessagingConnector: t.field({
    type: ConnectorRef, ...guard('Mutation', 'updateMessagingConnector', updateConnectorOp),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateConnectorInput, required: true }) },
    resolve: (_r, args, ctx) => run(updateConnectorOp, ctx, { ...(toWire(args.input) as object), id: String(args.id) }),
  }),
  deleteMessagingConnector: t.id({
    ...guard('Mutation', 'deleteMessagingConnector', deleteConnectorOp),
    description: 'Deletes the connector (no route may use it); returns its id.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => {
      await run(deleteConnectorOp, ctx, { id: String(args.id) });
      return String(args.id);
    },
  }),
  createMessagingRoute: t.field({
    type: RouteRef, ...guard('Mutation', 'createMessagingRoute', createRouteOp),
    args: { input: t.arg({ type: CreateRouteInput, required: true }) },
    resolve: (_r, args, ctx) => run(createRouteOp, ctx, toWire(args.input)),
  }),
  updateMessagingRoute: t.field({
    type: RouteRef, ...guard('Mutation', 'updateMessagingRoute', updateRouteOp),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateRouteInput, required: true }) },
    resolve: (_r, args, ctx) => run(updateRouteOp, ctx, { ...patchWire(args.input as Record<string, unknown>), id: String(args.id) }),
  }),
  deleteMessagingRoute: t.id({
    ...guard('Mutation', 'deleteMessagingRoute', deleteRouteOp),
    description: 'Deletes the route; returns its id.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => {
      await run(deleteRouteOp, ctx, { id: String(args.id) });
      return String(args.id);
    },
  }),
}));
