/** GraphQL twins of the verify routes, run through the same operations. No field carries a code except the test-mode sandbox one. */
import { builder } from '../../graphql/builder.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { toWire } from '../../graphql/wire.ts';
import type { Verification } from './verify.entities.ts';
import type { EffectiveVerifySettings } from './verify.service.ts';
import { EXPIRY_REASONS, VERIFICATION_STATUSES, VERIFY_CHANNELS } from './verify.states.ts';
import {
  checkVerificationOp, getVerificationOp, getVerifySettingsOp, listVerificationsOp, sandboxVerificationCodeOp, sendVerificationOp, updateVerifySettingsOp,
} from './verify.operations.ts';

const VerifyChannelEnum = builder.enumType('VerifyChannel', { values: VERIFY_CHANNELS });
const VerificationStatusEnum = builder.enumType('VerificationStatus', { values: VERIFICATION_STATUSES });
const ExpiryReasonEnum = builder.enumType('VerificationExpiryReason', { values: EXPIRY_REASONS });

export const VerificationRef = builder.node(builder.objectRef<Verification>('Verification'), {
  id: { resolve: (v) => v.id },
  loadOne: (id, ctx) => run(getVerificationOp, ctx, { id }),
  fields: (t) => ({
    channel: t.field({ type: VerifyChannelEnum, resolve: (v) => v.channel }),
    to: t.exposeString('to'),
    status: t.field({ type: VerificationStatusEnum, resolve: (v) => v.status }),
    valid: t.boolean({ description: 'True once the verification is approved', resolve: (v) => v.status === 'approved' }),
    locale: t.exposeString('locale'),
    codeLength: t.exposeInt('codeLength'),
    maxAttempts: t.exposeInt('maxAttempts'),
    attempts: t.exposeInt('attempts'),
    remainingAttempts: t.int({ resolve: (v) => (v.status === 'pending' || v.status === 'rejected' ? Math.max(0, v.maxAttempts - v.attempts) : 0) }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
    messageId: t.exposeString('messageId', { nullable: true }),
    expiryReason: t.field({ type: ExpiryReasonEnum, nullable: true, resolve: (v) => v.expiryReason }),
    supersededBy: t.exposeString('supersededBy', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    approvedAt: t.expose('approvedAt', { type: 'DateTime', nullable: true }),
    expiredAt: t.expose('expiredAt', { type: 'DateTime', nullable: true }),
    maxedAt: t.expose('maxedAt', { type: 'DateTime', nullable: true }),
  }),
});

const VerifySettingsRef = builder.objectRef<EffectiveVerifySettings>('VerifySettings').implement({
  fields: (t) => ({
    codeTtlSeconds: t.exposeInt('codeTtlSeconds'),
    codeLength: t.exposeInt('codeLength'),
    maxAttempts: t.exposeInt('maxAttempts'),
    appName: t.exposeString('appName', { nullable: true }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', nullable: true }),
  }),
});

const SendVerificationInput = builder.inputType('SendVerificationInput', {
  fields: (t) => ({
    to: t.string({ required: true, description: 'E.164 number (sms, whatsapp) or email address (email)' }),
    channel: t.field({ type: VerifyChannelEnum, required: true }),
    maxAttempts: t.int({ required: false, description: '1-10; default from the verify settings (5)' }),
    codeLength: t.int({ required: false, description: '4-10; default from the verify settings (6)' }),
    locale: t.string({ required: false, description: 'en (default), es, fr, de, tr, ar; a region such as es-MX is accepted' }),
  }),
});

const CheckVerificationInput = builder.inputType('CheckVerificationInput', {
  fields: (t) => ({
    verificationId: t.id({ required: true }),
    code: t.string({ required: true }),
  }),
});

const UpdateVerifySettingsInput = builder.inputType('UpdateVerifySettingsInput', {
  description: 'Fields left out keep their value; an explicit null puts a field back to its default.',
  fields: (t) => ({
    codeTtlSeconds: t.int({ required: false, description: '60-86400' }),
    codeLength: t.int({ required: false, description: '4-10' }),
    maxAttempts: t.int({ required: false, description: '1-10' }),
    appName: t.string({ required: false, description: 'Named in the built-in messages (up to 30 characters)' }),
  }),
});

builder.queryFields((t) => ({
  verifications: t.connection({
    type: VerificationRef, ...guard('Query', 'verifications', listVerificationsOp),
    args: {
      status: t.arg({ type: VerificationStatusEnum, required: false }),
      channel: t.arg({ type: VerifyChannelEnum, required: false }),
      to: t.arg.string({ required: false, description: 'Exact recipient (E.164 or email)' }),
    },
    resolve: async (_r, args, ctx) => toConnection(await run(listVerificationsOp, ctx, {
      ...pageRequest(args), status: args.status ?? undefined, channel: args.channel ?? undefined, to: args.to ?? undefined,
    })),
  }),
  verification: t.field({
    type: VerificationRef, ...guard('Query', 'verification', getVerificationOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getVerificationOp, ctx, { id: String(args.id) }),
  }),
  verifySettings: t.field({
    type: VerifySettingsRef, ...guard('Query', 'verifySettings', getVerifySettingsOp),
    resolve: (_r, _a, ctx) => run(getVerifySettingsOp, ctx, {}),
  }),
  sandboxVerificationCode: t.string({
    ...guard('Query', 'sandboxVerificationCode', sandboxVerificationCodeOp),
    description: 'Test mode only: the code the sandbox delivered for a verification (FORBIDDEN for live-mode verifications).',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => (await run(sandboxVerificationCodeOp, ctx, { id: String(args.id) })).code,
  }),
}));

builder.mutationFields((t) => ({
  sendVerification: t.field({
    type: VerificationRef, ...guard('Mutation', 'sendVerification', sendVerificationOp),
    args: { input: t.arg({ type: SendVerificationInput, required: true }) },
    resolve: (_r, args, ctx) => run(sendVerificationOp, ctx, toWire(args.input)),
  }),
  checkVerification: t.field({
    type: VerificationRef, ...guard('Mutation', 'checkVerification', checkVerificationOp),
    description: 'Status approved, rejected (attempts remain), expired or maxed; an approved verification answers CONFLICT.',
    args: { input: t.arg({ type: CheckVerificationInput, required: true }) },
    resolve: (_r, args, ctx) => run(checkVerificationOp, ctx, { verification_id: String(args.input.verificationId), code: args.input.code }),
  }),
  updateVerifySettings: t.field({
    type: VerifySettingsRef, ...guard('Mutation', 'updateVerifySettings', updateVerifySettingsOp),
    args: { input: t.arg({ type: UpdateVerifySettingsInput, required: true }) },
    // Not toWire: an explicit null (reset to the default) must survive.
    resolve: (_r, args, ctx) => run(updateVerifySettingsOp, ctx, {
      code_ttl_seconds: args.input.codeTtlSeconds, code_length: args.input.codeLength, max_attempts: args.input.maxAttempts, app_name: args.input.appName,
    }),
  }),
}));
