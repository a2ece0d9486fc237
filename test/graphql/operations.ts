/**
 * GraphQL operations the tests call through typed documents. `npm run codegen` reads the
 * `graphql(…)` calls below and generates `./gql/` (graphql-codegen client preset, string documents):
 * each document carries its result and variables types, so a changed schema fails typecheck here.
 */
import { graphql } from './gql/index.ts';

export const SendSms = graphql(`
  mutation SendSms($input: SendSmsInput!) {
    sendSms(input: $input) {
      id
      channel
      to
      status
      segments
      createdAt
    }
  }
`);

export const MessageStatus = graphql(`
  query MessageStatus($id: ID!) {
    message(id: $id) {
      id
      status
      statusHistory {
        status
      }
    }
  }
`);

export const RecentMessages = graphql(`
  query RecentMessages($first: Int!, $to: String) {
    messages(first: $first, to: $to) {
      edges {
        node {
          id
          to
          status
        }
      }
      pageInfo {
        hasNextPage
        endCursor
      }
    }
  }
`);
