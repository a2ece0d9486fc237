/** Access fixtures of the verify module: verifications and their settings (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

export default defineAccessFixtures(({ t, a, phone }) => ({
  fixtures: {
    ver: async () => (await t.rest('POST', '/v1/verify/send', { key: a.testKey, body: { to: phone(), channel: 'sms' } })).body.data.verification_id,
  },
  restBodies: {
    'POST /v1/verify/send': () => ({ to: phone(), channel: 'sms' }),
    'POST /v1/verify/check': { verification_id: 'ver_01jd0000000000000000000000', code: '000000' },
    'PUT /v1/verify/settings': { code_ttl_seconds: 600 },
  },
  gqlSamples: {
    'Query.verifications': { doc: '{ verifications(first: 1) { edges { cursor } } }' },
    'Query.verification': { doc: 'query($id: ID!) { verification(id: $id) { id } }', resource: 'ver' },
    'Query.verifySettings': { doc: '{ verifySettings { codeTtlSeconds } }' },
    'Query.sandboxVerificationCode': { doc: 'query($id: ID!) { sandboxVerificationCode(id: $id) }', resource: 'ver' },
    'Mutation.sendVerification': { doc: 'mutation($to: String!) { sendVerification(input: { to: $to, channel: sms }) { id } }', vars: () => ({ to: phone() }) },
    'Mutation.checkVerification': { doc: 'mutation { checkVerification(input: { verificationId: "ver_01jd0000000000000000000000", code: "000000" }) { id } }' },
    'Mutation.updateVerifySettings': { doc: 'mutation { updateVerifySettings(input: { codeTtlSeconds: 600 }) { codeTtlSeconds } }' },
  },
}));
