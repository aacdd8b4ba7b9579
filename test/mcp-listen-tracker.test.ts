// The listen tracker on its own, fed the messages a 2026-07-28 stdio session
// carries: a `subscriptions/listen` stream counts as a manifest subscription
// from the acknowledgement that honours the manifest's URI until the client
// cancels it or the server answers the listen request. The whole wire is in
// mcp-revisions.test.ts; here each message kind is checked on its own.

import { SUBSCRIPTION_ID_META_KEY, type JSONRPCMessage } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { manifestListenTracker } from '../src/mcp/listen-tracker.js';
import { ManifestWatch } from '../src/mcp/manifest-watch.js';
import { MANIFEST_URI as MANIFEST } from './helpers/mcp-client.js';

function tracked() {
  let asked = 0;
  const watch = new ManifestWatch({ sha256: async () => { asked++; return 'a'; }, intervalMs: 60_000, log: () => undefined });
  return { watch, tracker: manifestListenTracker(watch), asked: () => asked };
}

const ack = (id: string | number, resourceSubscriptions?: unknown): JSONRPCMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/subscriptions/acknowledged',
  params: { notifications: resourceSubscriptions === undefined ? {} : { resourceSubscriptions }, _meta: { [SUBSCRIPTION_ID_META_KEY]: id } },
});
const cancelled = (requestId: string | number): JSONRPCMessage => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } });
const listenEnded = (id: string | number): JSONRPCMessage => ({ jsonrpc: '2.0', id, result: {} });

describe('manifestListenTracker', () => {
  it('subscribes on an acknowledgement that honours the manifest, and hands back the wait for its starting sha256', async () => {
    const { watch, tracker, asked } = tracked();
    const confirmed = tracker.outbound(ack(7, ['knowledgefs://other', MANIFEST]));
    expect(confirmed).toBeInstanceOf(Promise);
    await confirmed;
    expect(watch.subscribed).toBe(true);
    expect(asked()).toBe(1);
    watch.close();
  });

  it('does not subscribe on an acknowledgement without the manifest, without resource subscriptions, or with a malformed list', () => {
    for (const subs of [['knowledgefs://other'], undefined, MANIFEST, { 0: MANIFEST }]) {
      const { watch, tracker, asked } = tracked();
      expect(tracker.outbound(ack(1, subs))).toBeUndefined();
      expect(watch.subscribed).toBe(false);
      expect(asked()).toBe(0);
    }
  });

  it('takes only the acknowledgement as the start of a listen, whatever another message carries', () => {
    const { watch, tracker } = tracked();
    const shaped = { notifications: { resourceSubscriptions: [MANIFEST] }, _meta: { [SUBSCRIPTION_ID_META_KEY]: 9 } };
    expect(tracker.outbound({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: shaped })).toBeUndefined();
    expect(tracker.outbound({ jsonrpc: '2.0', id: 9, method: 'subscriptions/listen', params: shaped })).toBeUndefined();
    expect(watch.subscribed).toBe(false);
  });

  it('does not throw on an acknowledgement or cancellation missing its parts', () => {
    const { watch, tracker } = tracked();
    const method = 'notifications/subscriptions/acknowledged';
    expect(() => tracker.outbound({ jsonrpc: '2.0', method })).not.toThrow();
    expect(() => tracker.outbound({ jsonrpc: '2.0', method, params: { _meta: { [SUBSCRIPTION_ID_META_KEY]: 1 } } })).not.toThrow();
    expect(watch.subscribed).toBe(false);
    expect(() => tracker.outbound({ jsonrpc: '2.0', method, params: { notifications: { resourceSubscriptions: [MANIFEST] } } })).not.toThrow();
    expect(() => tracker.inbound({ jsonrpc: '2.0', method: 'notifications/cancelled' })).not.toThrow();
    watch.close();
  });

  it('unsubscribes when the client cancels that listen, and only that one', async () => {
    const { watch, tracker } = tracked();
    await tracker.outbound(ack(1, [MANIFEST]));
    await tracker.outbound(ack('b', [MANIFEST]));
    tracker.inbound(cancelled(1));
    expect(watch.subscribed).toBe(true);
    tracker.inbound(cancelled('1')); // a string id is another listen than the number 1
    tracker.inbound(cancelled(2));
    expect(watch.subscribed).toBe(true);
    tracker.inbound(cancelled('b'));
    expect(watch.subscribed).toBe(false);
  });

  it('unsubscribes when the server answers the listen request, and not on another answer or a request of its own with that id', async () => {
    const { watch, tracker } = tracked();
    await tracker.outbound(ack(3, [MANIFEST]));
    expect(tracker.outbound(listenEnded(4))).toBeUndefined();
    expect(tracker.outbound({ jsonrpc: '2.0', id: 3, method: 'roots/list' })).toBeUndefined();
    expect(tracker.outbound({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: MANIFEST } })).toBeUndefined();
    expect(watch.subscribed).toBe(true);
    expect(tracker.outbound({ jsonrpc: '2.0', id: 3, error: { code: -32603, message: 'closing' } })).toBeUndefined();
    expect(watch.subscribed).toBe(false);
  });

  it('takes no inbound message but a cancellation as the end of a listen', async () => {
    const { watch, tracker } = tracked();
    await tracker.outbound(ack(5, [MANIFEST]));
    tracker.inbound({ jsonrpc: '2.0', method: 'notifications/progress', params: { requestId: 5, progressToken: 5, progress: 1 } });
    tracker.inbound({ jsonrpc: '2.0', id: 5, result: {} });
    tracker.inbound({ jsonrpc: '2.0', method: 'notifications/cancelled' });
    expect(watch.subscribed).toBe(true);
    tracker.inbound(cancelled(5));
    expect(watch.subscribed).toBe(false);
  });
});
