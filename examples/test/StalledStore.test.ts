/**
 * A store that stops answering (its connection stays open: no RST, no FIN) never holds a Netlify
 * function past its time limit. Before the reservation, the answer is 503 and the handler never
 * runs; while the handler runs, its response comes back, unrecorded, before the cut-off (every store
 * call ends 100 ms before it; here the answers came 2.9 s into a 3 s limit). On the
 * PostgreSQL server (or PGlite without one) and on DynamoDB (DynamoDB Local and dynalite), each
 * behind a proxy that holds every byte.
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import { FunctionResponse, NetlifyFunction } from "@effect-idempotency/netlify"
import { Stores } from "@effect-idempotency/test-support"
import { TcpProxy } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"

declare module "vitest" {
  export interface ProvidedContext {
    readonly dynamodbBackends: ReadonlyArray<Stores.DynamoDbEndpoint>
  }
}

const TIME_LIMIT_MS = 3000
/** Generous for a loaded two-core machine, and far below "no answer after 30 s". */
const SLACK_MS = 4000

const postgres = Stores.postgres({ table: "stalled", pgliteConnections: 8, drop: true })

const dynamodb = (endpoint: Stores.DynamoDbEndpoint) => Stores.dynamodb(endpoint, { table: "stalled" })

/** A Netlify function over `store`; its handler signals `started`, then waits for `proceed`. */
const orderFunction = (store: Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>) =>
  Effect.gen(function*() {
    const started = yield* Deferred.make<void>()
    const proceed = yield* Deferred.make<void>()
    const calls: Array<number> = []
    const handler = yield* Effect.acquireRelease(
      Effect.sync(() =>
        NetlifyFunction.idempotent({
          name: "stalled-store",
          layer: store,
          payload: Schema.Struct({ n: Schema.Number }),
          timeLimit: `${TIME_LIMIT_MS} millis`,
          handler: (payload) =>
            Effect.gen(function*() {
              calls.push(payload.n)
              if (payload.n > 0) {
                yield* Deferred.succeed(started, undefined)
                yield* Deferred.await(proceed)
              }
              return FunctionResponse.json({ n: payload.n }, { status: 201 })
            })
        })
      ),
      (handler) => Effect.promise(() => handler.dispose())
    )
    const invoke = (n: number) =>
      Effect.promise(async () => {
        const startedAt = performance.now()
        const response = await handler(
          new Request("http://127.0.0.1/.netlify/functions/orders", {
            method: "POST",
            headers: { "Idempotency-Key": randomUUID() },
            body: JSON.stringify({ n })
          }),
          {}
        )
        return { status: response.status, millis: performance.now() - startedAt }
      })
    /**
     * The function's store set up (table, connections) before a stall: a healthy request answered
     * 201. On a loaded machine the first one can spend the whole time limit setting up (a 503 or a
     * 504, by design), so a few are tried, each with a key of its own.
     */
    const warm = Effect.gen(function*() {
      let status = 0
      for (let i = 0; i < 5 && status !== 201; i++) status = (yield* invoke(0)).status
      assert.strictEqual(status, 201, "the store was never ready before the stall")
    })
    return { calls, invoke, proceed: Deferred.succeed(proceed, undefined), started: Deferred.await(started), warm }
  })

/** The order function on `backend`'s store behind a proxy, warmed up: a first order answered 201. */
const warmedBehindProxy = (backend: Stores.Backend) =>
  Effect.gen(function*() {
    const proxy = yield* TcpProxy.make(yield* backend.target)
    const fn = yield* orderFunction(backend.store(proxy.port))
    yield* fn.warm
    return { fn, proxy }
  })

const suite = (backend: Stores.Backend) =>
  describe(`a stalled store never holds a Netlify function past its time limit: ${backend.name}`, () => {
    it.scopedLive(
      "a stall before the reservation: 503 within the time limit, the handler never runs",
      () =>
        Effect.gen(function*() {
          const { fn, proxy } = yield* warmedBehindProxy(backend)
          yield* proxy.stall()
          const reply = yield* fn.invoke(1)
          assert.strictEqual(reply.status, 503)
          assert.isBelow(reply.millis, TIME_LIMIT_MS + SLACK_MS)
          assert.notInclude(fn.calls, 1)
          yield* proxy.resume
        }),
      60_000
    )

    it.scopedLive(
      "a stall while the handler runs: its response comes back unrecorded by the cut-off",
      () =>
        Effect.gen(function*() {
          const { fn, proxy } = yield* warmedBehindProxy(backend)
          const pending = yield* Effect.fork(fn.invoke(1))
          yield* fn.started
          yield* proxy.stall()
          yield* fn.proceed
          const reply = yield* Fiber.join(pending)
          assert.strictEqual(reply.status, 201)
          assert.isBelow(reply.millis, TIME_LIMIT_MS + SLACK_MS)
          yield* proxy.resume
        }),
      60_000
    )
  })

suite(postgres)
for (const backend of inject("dynamodbBackends")) suite(dynamodb(backend))
