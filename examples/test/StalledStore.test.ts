/**
 * A store that stops answering (its connection stays open: no RST, no FIN) never holds a Netlify
 * function past its time limit. Before the reservation, the answer is 503 and the handler never
 * runs; while the handler runs, its response comes back, unrecorded, before the cut-off (every store
 * call ends 100 ms before it; here the answers came 2.9 s into a 3 s limit). On the
 * PostgreSQL server (or PGlite without one) and on DynamoDB (DynamoDB Local and dynalite), each
 * behind a proxy that holds every byte.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import { FunctionResponse, NetlifyFunction } from "@effect-idempotency/netlify"
import { PgIdempotencyMigration, PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import { TcpProxy } from "@effect-idempotency/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"

declare module "vitest" {
  export interface ProvidedContext {
    readonly dynamodbBackends: ReadonlyArray<{ readonly name: string; readonly endpoint: string }>
  }
}

const TIME_LIMIT_MS = 3000
/** Generous for a loaded two-core machine, and far below "no answer after 30 s". */
const SLACK_MS = 4000

interface Target {
  readonly host: string
  readonly port: number
}

interface Backend {
  readonly name: string
  /** The store's server, for the whole suite. */
  readonly target: Effect.Effect<Target, unknown, Scope.Scope>
  /** The store over the proxy listening on `port`. */
  readonly store: (port: number) => Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>
}

const serverUrl = process.env.TEST_PG_URL === "" ? undefined : process.env.TEST_PG_URL

const pgStore = (database: string) => (port: number) => {
  const table = `stalled_${randomUUID().replaceAll("-", "_")}`
  return Layer.scoped(
    IdempotencyStore.IdempotencyStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // the table and its function are the test's own: dropped when the function is disposed
      yield* Effect.acquireRelease(
        PgIdempotencyMigration.migration({ table }),
        () =>
          sql.unsafe(`DROP TABLE IF EXISTS "${table}"; DROP FUNCTION IF EXISTS "${table}_reserve"`).pipe(
            Effect.timeout("5 seconds"),
            Effect.ignore
          )
      )
      return yield* PgIdempotencyStore.make({ table })
    })
  ).pipe(
    Layer.provide(PgClient.layer({ url: Redacted.make(`postgres://postgres@127.0.0.1:${port}/${database}`) }))
  )
}

const postgres: Backend = serverUrl === undefined
  ? {
    name: "PostgreSQL on PGlite (TEST_PG_URL is not set)",
    target: Effect.gen(function*() {
      const db = yield* Effect.acquireRelease(
        Effect.promise(() => PGlite.create()),
        (db) => Effect.promise(() => db.close())
      )
      const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 8 })
      yield* Effect.acquireRelease(Effect.promise(() => server.start()), () => Effect.promise(() => server.stop()))
      const [host, port] = server.getServerConn().split(":")
      return { host: host!, port: Number(port) }
    }),
    store: pgStore("postgres")
  }
  : {
    name: "the PostgreSQL server (TEST_PG_URL)",
    target: Effect.sync(() => {
      const url = new URL(serverUrl)
      return { host: url.hostname, port: Number(url.port || 5432) }
    }),
    store: pgStore(new URL(serverUrl).pathname.slice(1))
  }

const dynamodb = (backend: { readonly name: string; readonly endpoint: string }): Backend => ({
  name: `DynamoDB on ${backend.name}`,
  target: Effect.sync(() => {
    const url = new URL(backend.endpoint)
    return { host: url.hostname, port: Number(url.port) }
  }),
  store: (port) => {
    const tableName = `stalled-${randomUUID()}`
    return Layer.effect(
      IdempotencyStore.IdempotencyStore,
      Effect.zipRight(DynamoDbTable.create({ tableName }), DynamoDbStore.make({ tableName }))
    ).pipe(
      Layer.provide(DynamoDbClient.layer({
        endpoint: `http://127.0.0.1:${port}`,
        region: "us-east-1",
        credentials: { accessKeyId: "local", secretAccessKey: "local" }
      }))
    )
  }
})

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

const suite = (backend: Backend) =>
  describe(`a stalled store never holds a Netlify function past its time limit: ${backend.name}`, () => {
    it.scopedLive(
      "a stall before the reservation: 503 within the time limit, the handler never runs",
      () =>
        Effect.gen(function*() {
          const proxy = yield* TcpProxy.make(yield* backend.target)
          const fn = yield* orderFunction(backend.store(proxy.port))
          yield* fn.warm
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
          const proxy = yield* TcpProxy.make(yield* backend.target)
          const fn = yield* orderFunction(backend.store(proxy.port))
          yield* fn.warm
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
