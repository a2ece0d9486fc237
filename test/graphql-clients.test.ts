/**
 * `/graphql` driven by client libraries no one here wrote, as dashboard teams use it: Apollo Client
 * (normalised cache, `relayStylePagination`, graphql-ws link), urql (Graphcache with its
 * `relayPagination` resolver, the graphql-sse client for subscriptions) and Relay's runtime
 * (Global Object Identification: records keyed by `id`, a `node(id:)` refetch). Each library's own
 * code parses our answers; a shape it cannot read fails here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApolloClient, ApolloLink, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { CombinedGraphQLErrors } from '@apollo/client/errors';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { relayStylePagination } from '@apollo/client/utilities';
import { Client as UrqlClient, fetchExchange, subscriptionExchange } from '@urql/core';
import { cacheExchange as graphcache } from '@urql/exchange-graphcache';
import { relayPagination } from '@urql/exchange-graphcache/extras';
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient } from 'graphql-ws';
import { Environment, fetchQuery, Network, RecordSource, Store, createOperationDescriptor, type ConcreteRequest } from 'relay-runtime';
import { startTestApp, type TestApp } from './helpers/testApp.ts';

let t: TestApp;
// Workers on: the sandbox's delivery reports move messages to `delivered` for the subscriptions.
beforeAll(async () => { t = await startTestApp({ workers: true }); });
afterAll(async () => { await t?.close(); });

const CONTACT_FIELDS = gql`
  fragment ContactFields on Contact { id firstName lastName phone tags }
`;
const CONTACTS_PAGE = gql`
  ${CONTACT_FIELDS}
  query ContactsPage($first: Int, $after: String, $last: Int, $before: String, $tag: String) {
    contacts(first: $first, after: $after, last: $last, before: $before, tag: $tag) {
      edges { cursor node { ...ContactFields } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
`;
const CREATE_CONTACT = gql`
  ${CONTACT_FIELDS}
  mutation CreateContact($input: CreateContactInput!) { createContact(input: $input) { ...ContactFields } }
`;
const UPDATE_CONTACT = gql`
  ${CONTACT_FIELDS}
  mutation UpdateContact($id: ID!, $input: UpdateContactInput!) { updateContact(id: $id, input: $input) { ...ContactFields } }
`;
const NODE = gql`
  ${CONTACT_FIELDS}
  query Node($id: ID!) { node(id: $id) { id ... on Contact { ...ContactFields } } }
`;

type ContactNode = { __typename: 'Contact'; id: string; firstName: string | null; lastName: string | null; phone: string | null; tags: string[] };
type ContactsPage = { contacts: { edges: { cursor: string; node: ContactNode }[]; pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null } } };

function apollo(key: string) {
  const http = new HttpLink({ uri: `${t.baseUrl}/graphql`, headers: { 'X-API-Key': key } });
  const ws = new GraphQLWsLink(createWsClient({ url: `${t.baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: key }, retryAttempts: 0, lazy: true }));
  const link = ApolloLink.split(({ query }) => query.definitions.some((d) => d.kind === 'OperationDefinition' && d.operation === 'subscription'), ws, http);
  return new ApolloClient({
    link,
    cache: new InMemoryCache({ typePolicies: { Query: { fields: { contacts: relayStylePagination(['tag', 'search', 'country', 'lifecycleStage']) } } } }),
  });
}

/** Five contacts under one tag (created through the client under test, oldest first). */
async function seedContacts(client: ReturnType<typeof apollo>, tag: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await client.mutate<{ createContact: ContactNode }>({ mutation: CREATE_CONTACT, variables: { input: { firstName: `P${i}`, phone: `+1415555${String(1000 + i)}`, tags: [tag] } } });
    ids.push(r.data!.createContact.id);
  }
  return ids;
}

describe('Apollo Client', () => {
  it('pages a connection forward and back with relayStylePagination, fragments and variables', async () => {
    const org = await t.createOrg('growth');
    const client = apollo(org.testKey);
    const ids = await seedContacts(client, 'apollo-page');
    const newestFirst = [...ids].reverse();

    const first = await client.query<ContactsPage>({ query: CONTACTS_PAGE, variables: { first: 2, tag: 'apollo-page' } });
    expect(first.data!.contacts.edges.map((e) => e.node.id)).toEqual(newestFirst.slice(0, 2));
    expect(first.data!.contacts.pageInfo.hasNextPage).toBe(true);

    // fetchMore merges the next pages into the same list (the policy's merge reads edges and pageInfo).
    let after = first.data!.contacts.pageInfo.endCursor;
    while (after) {
      const more = await client.query<ContactsPage>({ query: CONTACTS_PAGE, variables: { first: 2, after, tag: 'apollo-page' }, fetchPolicy: 'network-only' });
      after = more.data!.contacts.pageInfo.hasNextPage ? more.data!.contacts.pageInfo.endCursor : null;
    }
    const merged = client.readQuery<ContactsPage>({ query: CONTACTS_PAGE, variables: { first: 2, tag: 'apollo-page' } });
    expect(merged!.contacts.edges.map((e) => e.node.id)).toEqual(newestFirst);
    expect(merged!.contacts.pageInfo.hasNextPage).toBe(false);

    // Backward from the end: the last two, then the two before them.
    const lastTwo = await client.query<ContactsPage>({ query: CONTACTS_PAGE, variables: { last: 2, tag: 'apollo-page' }, fetchPolicy: 'no-cache' });
    expect(lastTwo.data!.contacts.edges.map((e) => e.node.id)).toEqual(newestFirst.slice(3));
    expect(lastTwo.data!.contacts.pageInfo.hasPreviousPage).toBe(true);
    const before = await client.query<ContactsPage>({ query: CONTACTS_PAGE, variables: { last: 2, before: lastTwo.data!.contacts.pageInfo.startCursor, tag: 'apollo-page' }, fetchPolicy: 'no-cache' });
    expect(before.data!.contacts.edges.map((e) => e.node.id)).toEqual(newestFirst.slice(1, 3));
    client.stop();
  });

  it('normalises by __typename and id: a mutation and a node(id:) refetch update the cached list', async () => {
    const org = await t.createOrg('growth');
    const client = apollo(org.testKey);
    const ids = await seedContacts(client, 'apollo-cache');
    await client.query<ContactsPage>({ query: CONTACTS_PAGE, variables: { first: 5, tag: 'apollo-cache' } });
    expect(client.cache.identify({ __typename: 'Contact', id: ids[0] })).toBe(`Contact:${ids[0]}`);

    await client.mutate({ mutation: UPDATE_CONTACT, variables: { id: ids[0], input: { firstName: 'Renamed' } } });
    const cached = client.readQuery<ContactsPage>({ query: CONTACTS_PAGE, variables: { first: 5, tag: 'apollo-cache' } });
    expect(cached!.contacts.edges.find((e) => e.node.id === ids[0])!.node.firstName).toBe('Renamed');

    // A change made elsewhere (REST), then a node(id:) refetch: the list shows it from the cache.
    const patched = await t.rest('PUT', `/v1/contacts/${ids[1]}`, { key: org.testKey, body: { last_name: 'ViaRest' } });
    expect(patched.status, patched.text).toBe(200);
    const node = await client.query<{ node: ContactNode }>({ query: NODE, variables: { id: ids[1] }, fetchPolicy: 'network-only' });
    expect(node.data!.node).toMatchObject({ __typename: 'Contact', id: ids[1], lastName: 'ViaRest' });
    const after = client.readQuery<ContactsPage>({ query: CONTACTS_PAGE, variables: { first: 5, tag: 'apollo-cache' } });
    expect(after!.contacts.edges.find((e) => e.node.id === ids[1])!.node.lastName).toBe('ViaRest');
    client.stop();
  });

  it('sees our error code on a failed mutation and a missing node', async () => {
    const org = await t.createOrg('growth');
    const client = apollo(org.testKey);
    const failed = await client.mutate({ mutation: CREATE_CONTACT, variables: { input: { phone: 'not a phone' } } }).catch((e: unknown) => e);
    expect(CombinedGraphQLErrors.is(failed)).toBe(true);
    expect((failed as CombinedGraphQLErrors).errors[0]!.extensions!.code).toBe('INVALID_PHONE_NUMBER');

    const missing = await client.query<{ node: ContactNode | null }>({ query: NODE, variables: { id: 'con_01jd0000000000000000000000' }, errorPolicy: 'all' });
    expect(missing.data?.node ?? null).toBeNull();
    client.stop();
  });

  it('receives subscription events over graphql-ws', async () => {
    const org = await t.createOrg('growth');
    const client = apollo(org.testKey);
    const sent = await client.mutate<{ sendSms: { id: string } }>({ mutation: gql`mutation Send($input: SendSmsInput!) { sendSms(input: $input) { id status } }`, variables: { input: { to: '+14155550188', body: 'apollo ws' } } });
    const id = sent.data!.sendSms.id;
    const statuses = await new Promise<string[]>((resolve, reject) => {
      const seen: string[] = [];
      const sub = client.subscribe<{ messageStatus: { id: string; status: string } }>({ query: gql`subscription Status($id: ID!) { messageStatus(id: $id) { id status } }`, variables: { id } }).subscribe({
        next: (r) => {
          if (r.error) { reject(r.error); return; }
          seen.push(r.data!.messageStatus.status);
          if (r.data!.messageStatus.status === 'delivered') { sub.unsubscribe(); resolve(seen); }
        },
        error: reject,
      });
    });
    expect(statuses.at(-1)).toBe('delivered');
    client.stop();
  });
});

describe('urql', () => {
  function urql(key: string) {
    const sse = createSseClient({ url: `${t.baseUrl}/graphql`, headers: { 'X-API-Key': key }, retryAttempts: 0 });
    return {
      sse,
      client: new UrqlClient({
        url: `${t.baseUrl}/graphql`,
        fetchOptions: { headers: { 'X-API-Key': key } },
        exchanges: [
          graphcache({ resolvers: { Query: { contacts: relayPagination() } } }),
          fetchExchange,
          subscriptionExchange({
            forwardSubscription: (request) => ({
              subscribe: (sink) => ({ unsubscribe: sse.subscribe({ ...request, query: request.query ?? '' }, sink) }),
            }),
          }),
        ],
      }),
    };
  }

  it('pages with Graphcache relayPagination and normalises by id', async () => {
    const org = await t.createOrg('growth');
    const { client, sse } = urql(org.testKey);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await client.mutation<{ createContact: ContactNode }>(CREATE_CONTACT, { input: { firstName: `U${i}`, phone: `+1415556${String(1000 + i)}`, tags: ['urql-page'] } }).toPromise();
      expect(r.error).toBeUndefined();
      ids.push(r.data!.createContact.id);
    }
    const newestFirst = [...ids].reverse();
    const page1 = await client.query<ContactsPage>(CONTACTS_PAGE, { first: 2, tag: 'urql-page' }).toPromise();
    expect(page1.data!.contacts.edges.map((e) => e.node.id)).toEqual(newestFirst.slice(0, 2));
    // relayPagination concatenates the pages it has seen into one list for the query without `after`.
    const page2 = await client.query<ContactsPage>(CONTACTS_PAGE, { first: 2, after: page1.data!.contacts.pageInfo.endCursor, tag: 'urql-page' }).toPromise();
    expect(page2.data!.contacts.edges.map((e) => e.node.id)).toEqual(newestFirst.slice(0, 4));
    const page3 = await client.query<ContactsPage>(CONTACTS_PAGE, { first: 2, after: page2.data!.contacts.pageInfo.endCursor, tag: 'urql-page' }).toPromise();
    expect(page3.data!.contacts.edges.map((e) => e.node.id)).toEqual(newestFirst);
    expect(page3.data!.contacts.pageInfo.hasNextPage).toBe(false);

    // A mutation's answer updates the entity every cached list holds.
    await client.mutation(UPDATE_CONTACT, { id: ids[2], input: { firstName: 'UrqlRenamed' } }).toPromise();
    const cached = await client.query<ContactsPage>(CONTACTS_PAGE, { first: 2, tag: 'urql-page' }, { requestPolicy: 'cache-only' }).toPromise();
    expect(cached.data!.contacts.edges.find((e) => e.node.id === ids[2])!.node.firstName).toBe('UrqlRenamed');

    const failed = await client.mutation(CREATE_CONTACT, { input: { phone: 'not a phone' } }).toPromise();
    expect(failed.error?.graphQLErrors[0]?.extensions.code).toBe('INVALID_PHONE_NUMBER');
    sse.dispose();
  });

  it('receives subscription events over SSE (graphql-sse client)', async () => {
    const org = await t.createOrg('growth');
    const { client, sse } = urql(org.testKey);
    const sent = await client.mutation<{ sendSms: { id: string } }>(gql`mutation Send($input: SendSmsInput!) { sendSms(input: $input) { id } }`, { input: { to: '+14155550189', body: 'urql sse' } }).toPromise();
    expect(sent.error).toBeUndefined();
    const id = sent.data!.sendSms.id;
    const statuses = await new Promise<string[]>((resolve, reject) => {
      const seen: string[] = [];
      const { unsubscribe } = client.subscription<{ messageStatus: { id: string; status: string } }>(gql`subscription Status($id: ID!) { messageStatus(id: $id) { id status } }`, { id }).subscribe((r) => {
        if (r.error) { reject(r.error); return; }
        seen.push(r.data!.messageStatus.status);
        if (r.data!.messageStatus.status === 'delivered') { unsubscribe(); resolve(seen); }
      });
    });
    expect(statuses.at(-1)).toBe('delivered');
    sse.dispose();
  });
});

describe('Relay runtime', () => {
  /**
   * Relay's runtime reads artifacts its compiler would write; these two are written by hand in the
   * compiler's output format (ConcreteRequest: a reader fragment and a normalization operation), so
   * the store, normalisation by `id` and the network layer are Relay's own code.
   */
  const contactSelections = [
    { alias: null, args: null, kind: 'ScalarField', name: 'id', storageKey: null },
    { alias: null, args: null, kind: 'ScalarField', name: 'firstName', storageKey: null },
    { kind: 'ScalarField', alias: null, args: null, name: '__typename', storageKey: null },
  ] as const;
  // The fragment and the operation select the same (no fragment spreads in this query).
  const contactsSelections = [{
    alias: null, args: [{ kind: 'Variable', name: 'first', variableName: 'first' }], concreteType: 'QueryContactsConnection', kind: 'LinkedField', name: 'contacts', plural: false, storageKey: null,
    selections: [
      { alias: null, args: null, concreteType: 'QueryContactsConnectionEdge', kind: 'LinkedField', name: 'edges', plural: true, storageKey: null,
        selections: [{ alias: null, args: null, concreteType: 'Contact', kind: 'LinkedField', name: 'node', plural: false, storageKey: null, selections: contactSelections }] },
      { alias: null, args: null, concreteType: 'PageInfo', kind: 'LinkedField', name: 'pageInfo', plural: false, storageKey: null,
        selections: [{ alias: null, args: null, kind: 'ScalarField', name: 'hasNextPage', storageKey: null }] },
    ],
  }];
  const contactsQuery = {
    kind: 'Request',
    fragment: {
      kind: 'Fragment', name: 'RelayContactsQuery', type: 'Query', metadata: null, abstractKey: null,
      argumentDefinitions: [{ defaultValue: null, kind: 'LocalArgument', name: 'first' }],
      selections: contactsSelections,
    },
    operation: {
      kind: 'Operation', name: 'RelayContactsQuery',
      argumentDefinitions: [{ defaultValue: null, kind: 'LocalArgument', name: 'first' }],
      selections: contactsSelections,
    },
    params: {
      cacheID: 'relay-contacts', id: null, metadata: {}, name: 'RelayContactsQuery', operationKind: 'query',
      text: 'query RelayContactsQuery($first: Int) { contacts(first: $first) { edges { node { id firstName __typename } } pageInfo { hasNextPage } } }',
    },
  } as unknown as ConcreteRequest;
  const nodeQuery = {
    kind: 'Request',
    fragment: {
      kind: 'Fragment', name: 'RelayNodeQuery', type: 'Query', metadata: null, abstractKey: null,
      argumentDefinitions: [{ defaultValue: null, kind: 'LocalArgument', name: 'id' }],
      selections: [{ alias: null, args: [{ kind: 'Variable', name: 'id', variableName: 'id' }], concreteType: null, kind: 'LinkedField', name: 'node', plural: false, storageKey: null,
        selections: [{ kind: 'ScalarField', alias: null, args: null, name: '__typename', storageKey: null }, { alias: null, args: null, kind: 'ScalarField', name: 'id', storageKey: null },
          { kind: 'InlineFragment', type: 'Contact', abstractKey: null, selections: [{ alias: null, args: null, kind: 'ScalarField', name: 'firstName', storageKey: null }] }] }],
    },
    operation: {
      kind: 'Operation', name: 'RelayNodeQuery',
      argumentDefinitions: [{ defaultValue: null, kind: 'LocalArgument', name: 'id' }],
      selections: [{ alias: null, args: [{ kind: 'Variable', name: 'id', variableName: 'id' }], concreteType: null, kind: 'LinkedField', name: 'node', plural: false, storageKey: null,
        selections: [{ kind: 'ScalarField', alias: null, args: null, name: '__typename', storageKey: null }, { alias: null, args: null, kind: 'ScalarField', name: 'id', storageKey: null },
          { kind: 'InlineFragment', type: 'Contact', abstractKey: null, selections: [{ alias: null, args: null, kind: 'ScalarField', name: 'firstName', storageKey: null }] }] }],
    },
    params: { cacheID: 'relay-node', id: null, metadata: {}, name: 'RelayNodeQuery', operationKind: 'query', text: 'query RelayNodeQuery($id: ID!) { node(id: $id) { __typename id ... on Contact { firstName } } }' },
  } as unknown as ConcreteRequest;

  it('fetches a connection and a node(id:) into one record per global id', async () => {
    const org = await t.createOrg('growth');
    const created = await t.rest('POST', '/v1/contacts', { key: org.testKey, body: { first_name: 'Relay', phone: '+14155557000' } });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.id as string;
    const environment = new Environment({
      network: Network.create(async (params, variables) => {
        const res = await fetch(`${t.baseUrl}/graphql`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-API-Key': org.testKey }, body: JSON.stringify({ query: params.text, variables }) });
        return await res.json();
      }),
      store: new Store(new RecordSource()),
    });
    const list = await fetchQuery(environment, contactsQuery, { first: 10 }).toPromise() as { contacts: { edges: { node: { id: string; firstName: string } }[] } };
    expect(list.contacts.edges.map((e) => e.node.id)).toEqual([id]);
    // Relay keyed the contact's record by its id: the global id is the record's data id.
    const record = environment.getStore().getSource().get(id);
    expect(record).toMatchObject({ __id: id, __typename: 'Contact', firstName: 'Relay' });

    await t.rest('PUT', `/v1/contacts/${id}`, { key: org.testKey, body: { first_name: 'Refetched' } });
    const node = await fetchQuery(environment, nodeQuery, { id }).toPromise() as { node: { id: string; __typename: string; firstName: string } };
    expect(node.node).toEqual({ __typename: 'Contact', id, firstName: 'Refetched' });
    // The refetch wrote the same record: the connection now reads the new name from the store.
    const snapshot = environment.lookup(createOperationDescriptor(contactsQuery, { first: 10 }).fragment);
    expect((snapshot.data as { contacts: { edges: { node: { firstName: string } }[] } }).contacts.edges[0]!.node.firstName).toBe('Refetched');
  });
});
