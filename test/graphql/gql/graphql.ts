/* eslint-disable */
/** Internal type. DO NOT USE DIRECTLY. */
type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
/** Internal type. DO NOT USE DIRECTLY. */
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
import type { DocumentTypeDecoration } from '@graphql-typed-document-node/core';
export type Channel =
  | 'email'
  | 'rcs'
  | 'sms'
  | 'viber'
  | 'whatsapp';

export type MessageStatus =
  | 'delivered'
  | 'failed'
  | 'queued'
  | 'read'
  | 'sent';

export type SendSmsInput = {
  body?: string | null | undefined;
  from?: string | null | undefined;
  /** MMS: https URLs of the media (live: carrier API connectors only) */
  mediaUrls?: Array<string> | null | undefined;
  metadata?: unknown;
  templateId?: string | null | undefined;
  to: string;
  variables?: unknown;
  webhookUrl?: string | null | undefined;
};

export type SendSmsMutationVariables = Exact<{
  input: SendSmsInput;
}>;


export type SendSmsMutation = { sendSms: { id: string, channel: Channel, to: string, status: MessageStatus, segments: number | null, createdAt: string } };

export type MessageStatusQueryVariables = Exact<{
  id: string | number;
}>;


export type MessageStatusQuery = { message: { id: string, status: MessageStatus, statusHistory: Array<{ status: MessageStatus }> } };

export type RecentMessagesQueryVariables = Exact<{
  first: number;
  to?: string | null | undefined;
}>;


export type RecentMessagesQuery = { messages: { edges: Array<{ node: { id: string, to: string, status: MessageStatus } }>, pageInfo: { hasNextPage: boolean, endCursor: string | null } } };

export class TypedDocumentString<TResult, TVariables>
  extends String
  implements DocumentTypeDecoration<TResult, TVariables>
{
  __apiType?: NonNullable<DocumentTypeDecoration<TResult, TVariables>['__apiType']>;
  private value: string;
  public __meta__?: Record<string, any> | undefined;

  constructor(value: string, __meta__?: Record<string, any> | undefined) {
    super(value);
    this.value = value;
    this.__meta__ = __meta__;
  }

  override toString(): string & DocumentTypeDecoration<TResult, TVariables> {
    return this.value;
  }
}

export const SendSmsDocument = new TypedDocumentString(`
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
    `, {"hash":"sha256:5bfff6eb262ba7041f33832fac0cf9ccd23b16d88c35158d3a139f4a9cb81672"}) as unknown as TypedDocumentString<SendSmsMutation, SendSmsMutationVariables>;
export const MessageStatusDocument = new TypedDocumentString(`
    query MessageStatus($id: ID!) {
  message(id: $id) {
    id
    status
    statusHistory {
      status
    }
  }
}
    `, {"hash":"sha256:b2d26cede82118905fed57c9d518026e594e134f8dac820148e9afc55d3f8c90"}) as unknown as TypedDocumentString<MessageStatusQuery, MessageStatusQueryVariables>;
export const RecentMessagesDocument = new TypedDocumentString(`
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
    `, {"hash":"sha256:d294763789968305b60daf4fa12cd939febaf2429e4b12863084040deafbee01"}) as unknown as TypedDocumentString<RecentMessagesQuery, RecentMessagesQueryVariables>;