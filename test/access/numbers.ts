/** Access fixtures of the numbers module: phone numbers and port requests (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

export default defineAccessFixtures(({ t, a, buyable, portable }) => {
  const portBody = () => ({ numbers: [portable()], current_carrier: 'AT&T', authorization_name: 'Jane Doe' });
  return {
    fixtures: {
      num: async () => (await t.rest('POST', '/v1/numbers', { key: a.testKey, body: { number: buyable() } })).body.data.id,
      port: async () => (await t.rest('POST', '/v1/numbers/port', { key: a.testKey, body: portBody() })).body.data.id,
    },
    restBodies: {
      'POST /v1/numbers': () => ({ number: buyable() }),
      'PATCH /v1/numbers/{id}': { friendly_name: 'matrix' },
      'POST /v1/numbers/port': portBody,
    },
    gqlSamples: {
      'Query.availableNumbers': { doc: '{ availableNumbers(country: "US", limit: 1) { number } }' },
      'Query.phoneNumbers': { doc: '{ phoneNumbers(first: 1) { edges { cursor } } }' },
      'Query.phoneNumber': { doc: 'query($id: ID!) { phoneNumber(id: $id) { id } }', resource: 'num' },
      'Query.portRequests': { doc: '{ portRequests(first: 1) { edges { cursor } } }' },
      'Query.portRequest': { doc: 'query($id: ID!) { portRequest(id: $id) { id } }', resource: 'port' },
      'Mutation.buyNumber': { doc: 'mutation($number: String!) { buyNumber(input: { number: $number }) { id } }', vars: () => ({ number: buyable() }) },
      'Mutation.updateNumber': { doc: 'mutation($id: ID!) { updateNumber(id: $id, input: { friendlyName: "x" }) { id } }', resource: 'num' },
      'Mutation.releaseNumber': { doc: 'mutation($id: ID!) { releaseNumber(id: $id) }', resource: 'num' },
      'Mutation.createPortRequest': {
        doc: 'mutation($n: String!) { createPortRequest(input: { numbers: [$n], currentCarrier: "AT&T", authorizationName: "Jane Doe" }) { id } }',
        vars: () => ({ n: portable() }),
      },
    },
  };
});
