/* eslint-disable */
import * as types from './graphql.ts';



/**
 * Map of all GraphQL operations in the project.
 *
 * This map has several performance disadvantages:
 * 1. It is not tree-shakeable, so it will include all operations in the project.
 * 2. It is not minifiable, so the string of a GraphQL query will be multiple times inside the bundle.
 * 3. It does not support dead code elimination, so it will add unused operations.
 *
 * Therefore it is highly recommended to use the babel or swc plugin for production.
 * Learn more about it here: https://the-guild.dev/graphql/codegen/plugins/presets/preset-client#reducing-bundle-size
 */
type Documents = {
    "\n  mutation SendSms($input: SendSmsInput!) {\n    sendSms(input: $input) {\n      id\n      channel\n      to\n      status\n      segments\n      createdAt\n    }\n  }\n": typeof types.SendSmsDocument,
    "\n  query MessageStatus($id: ID!) {\n    message(id: $id) {\n      id\n      status\n      statusHistory {\n        status\n      }\n    }\n  }\n": typeof types.MessageStatusDocument,
    "\n  query RecentMessages($first: Int!, $to: String) {\n    messages(first: $first, to: $to) {\n      edges {\n        node {\n          id\n          to\n          status\n        }\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n": typeof types.RecentMessagesDocument,
};
const documents: Documents = {
    "\n  mutation SendSms($input: SendSmsInput!) {\n    sendSms(input: $input) {\n      id\n      channel\n      to\n      status\n      segments\n      createdAt\n    }\n  }\n": types.SendSmsDocument,
    "\n  query MessageStatus($id: ID!) {\n    message(id: $id) {\n      id\n      status\n      statusHistory {\n        status\n      }\n    }\n  }\n": types.MessageStatusDocument,
    "\n  query RecentMessages($first: Int!, $to: String) {\n    messages(first: $first, to: $to) {\n      edges {\n        node {\n          id\n          to\n          status\n        }\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n": types.RecentMessagesDocument,
};

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SendSms($input: SendSmsInput!) {\n    sendSms(input: $input) {\n      id\n      channel\n      to\n      status\n      segments\n      createdAt\n    }\n  }\n"): typeof import('./graphql.ts').SendSmsDocument;
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query MessageStatus($id: ID!) {\n    message(id: $id) {\n      id\n      status\n      statusHistory {\n        status\n      }\n    }\n  }\n"): typeof import('./graphql.ts').MessageStatusDocument;
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RecentMessages($first: Int!, $to: String) {\n    messages(first: $first, to: $to) {\n      edges {\n        node {\n          id\n          to\n          status\n        }\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n"): typeof import('./graphql.ts').RecentMessagesDocument;


export function graphql(source: string) {
  return (documents as any)[source] ?? {};
}
