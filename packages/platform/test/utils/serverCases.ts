/**
 * What the two server adapters, `IdempotencyHttpApi` on an `HttpApi` and `IdempotencyMiddleware` on
 * `HttpRouter` routes, must answer alike on their idempotent `POST /orders`: written once, run by each
 * adapter's test against its own real server.
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type { Vitest } from "@effect/vitest"
import { assert } from "@effect/vitest"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { YieldWrap } from "effect/Utils"
import { randomUUID } from "node:crypto"
import type { Client, Reply } from "./server.js"

/** What the handlers did: how many times each ran, by handler, key and tenant (`x-tenant`). */
export class Executions {
  readonly executions = new Map<string, number>()
  count(handler: string, request: HttpServerRequest.HttpServerRequest): number {
    const id = `${handler} ${request.headers["idempotency-key"] ?? ""} ${request.headers["x-tenant"] ?? ""}`
    const n = (this.executions.get(id) ?? 0) + 1
    this.executions.set(id, n)
    return n
  }
  runs(handler: string, key: string, tenant = ""): number {
    return this.executions.get(`${handler} ${key} ${tenant}`) ?? 0
  }
}

export const order = JSON.stringify({ sku: "A-1", quantity: 2 })

/** The body of a problem response. */
export const problem = (reply: Reply) =>
  JSON.parse(reply.text) as { type: string; title: string; status: number; detail: string }

/** A replay of `first`: its status, its bytes, the headers in `kept`, and the replay header. */
export const assertSameResponse = (replay: Reply, first: Reply, kept: ReadonlyArray<string> = ["content-type"]) => {
  assert.strictEqual(replay.status, first.status)
  assert.deepStrictEqual(replay.bytes, first.bytes)
  for (const header of kept) assert.strictEqual(replay.headers[header], first.headers[header], header)
  assert.strictEqual(replay.headers["idempotent-replayed"], "true")
}

/** The proxy in front of a server's store: refuses its connections, then lets them through again. */
export interface StoreProxy {
  readonly refuse: Effect.Effect<void>
  readonly resume: Effect.Effect<void>
}

/** A server under test, served on loopback: its client, the proxy to its store, and what `X` adds. */
export type ServerEnv<X> = { readonly client: Client; readonly proxy: StoreProxy } & X

/** A server under test: its client, the proxy to its store, and the runs of its `POST /orders` handler. */
export interface OrdersServer {
  readonly client: Client
  readonly proxy: StoreProxy
  readonly runs: (key: string, tenant?: string) => number
}

/**
 * The cases of `POST /orders` (answered 201, or 409 while it runs) that both adapters share: the scope
 * keeps tenants apart, 100 concurrent identical requests run the handler once, and a store that is
 * down answers 503 without calling the handler. `kept` names the headers a replay keeps.
 */
export const ordersCases = <R>(
  it: Vitest.MethodsNonLive<R, true>,
  server: Effect.Effect<OrdersServer, never, R>,
  kept: ReadonlyArray<string>
) => {
  it.effect("the scope keeps the keys of two tenants apart", () =>
    Effect.gen(function*() {
      const { client, runs } = yield* server
      const key = randomUUID()
      const a = yield* client.send("POST", "/orders", { key, body: order, headers: { "x-tenant": "a" } })
      const b = yield* client.send("POST", "/orders", { key, body: order, headers: { "x-tenant": "b" } })
      const againA = yield* client.send("POST", "/orders", { key, body: order, headers: { "x-tenant": "a" } })
      assert.notDeepEqual(a.bytes, b.bytes)
      assert.isUndefined(b.headers["idempotent-replayed"])
      assertSameResponse(againA, a, kept)
      assert.strictEqual(runs(key, "a"), 1)
      assert.strictEqual(runs(key, "b"), 1)
    }))

  it.effect("100 concurrent identical POSTs run the handler once", () =>
    Effect.gen(function*() {
      const { client, runs } = yield* server
      const key = randomUUID()
      const replies = yield* Effect.all(
        Array.from({ length: 100 }, () => client.send("POST", "/orders", { key, body: order })),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(runs(key), 1)
      const fresh = replies.filter((reply) =>
        reply.status === 201 && reply.headers["idempotent-replayed"] === undefined
      )
      assert.strictEqual(fresh.length, 1)
      for (const reply of replies) {
        assert.include([201, 409], reply.status)
        if (reply.status === 201) assert.deepStrictEqual(reply.bytes, fresh[0]!.bytes)
        else assert.isDefined(reply.headers["retry-after"])
      }
    }), { timeout: 60_000 })

  it.effect(
    "503 while the store is down: the handler is not called; it runs once the store is back",
    () =>
      Effect.gen(function*() {
        const { client, proxy, runs } = yield* server
        const key = randomUUID()
        yield* proxy.refuse
        const down = yield* client.send("POST", "/orders", { key, body: order }).pipe(Effect.ensuring(proxy.resume))
        assert.strictEqual(down.status, 503)
        assert.strictEqual(down.headers["content-type"], "application/problem+json")
        assert.strictEqual(runs(key), 0)
        assert.strictEqual((yield* client.send("POST", "/orders", { key, body: order })).status, 201)
        assert.strictEqual(runs(key), 1)
      }),
    { timeout: 60_000 }
  )
}

/**
 * `it.effect` for the tests of a server of `env`: the body, a generator as `Effect.gen` takes, is
 * given the server and a fresh key.
 */
export const serverTest = <R, I extends R, S>(it: Vitest.MethodsNonLive<R, true>, env: Context.Tag<I, S>) =>
(
  name: string,
  body: (server: S, key: string) => Generator<YieldWrap<Effect.Effect<unknown, unknown, R>>, void, unknown>
) => it.effect(name, () => Effect.flatMap(env, (server) => Effect.gen(() => body(server, randomUUID()))))
