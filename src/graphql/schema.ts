/** The whole GraphQL schema: the builder plus every module's types. Codegen prints it to schema/schema.graphql. */
import { builder } from './builder.ts';
import './platform.graphql.ts';
import '../modules/settings/settings.graphql.ts';
import '../modules/messaging/messaging.graphql.ts';
import '../modules/webhooks/webhooks.graphql.ts';
import '../modules/numbers/numbers.graphql.ts';
import '../modules/verify/verify.graphql.ts';
import '../modules/contacts/contacts.graphql.ts';

export const schema = builder.toSchema({ sortSchema: true });
export default schema;
