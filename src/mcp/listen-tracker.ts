// Following 2026-07-28 `subscriptions/listen` streams on the wire, for the
// manifest watch. The SDK's stdio entry serves listen itself and the server
// instance never sees it, so the stream's life is read off the messages: it
// counts as a manifest subscription from the acknowledgement that honours
// the manifest's URI until the client cancels it (`notifications/cancelled`)
// or the server ends it (the listen request's result). The acknowledgement
// goes out once the watch knows the manifest the subscription starts from.

import { SUBSCRIPTION_ID_META_KEY, type JSONRPCMessage } from '@modelcontextprotocol/server';
import { NAMES } from './guidance.js';
import type { ManifestWatch } from './manifest-watch.js';
import type { WireObserver } from './serve-stdio.js';

type Params = { _meta?: Record<string, unknown>; notifications?: { resourceSubscriptions?: unknown }; requestId?: unknown } | undefined;
const keyOf = (id: unknown) => `listen ${JSON.stringify(id)}`;

export function manifestListenTracker(watch: ManifestWatch): WireObserver {
  return {
    inbound(message) {
      if ('method' in message && message.method === 'notifications/cancelled') watch.unsubscribe(keyOf((message.params as Params)?.requestId));
    },
    outbound(message: JSONRPCMessage) {
      if ('method' in message && message.method === 'notifications/subscriptions/acknowledged') {
        const params: NonNullable<Params> = message.params ?? {};
        const uris = params.notifications?.resourceSubscriptions;
        if (Array.isArray(uris) && uris.includes(NAMES.manifestResource)) return watch.subscribe(keyOf(params._meta?.[SUBSCRIPTION_ID_META_KEY]));
      } else if (!('method' in message) && 'id' in message) {
        watch.unsubscribe(keyOf(message.id));
      }
      return undefined;
    },
  };
}
