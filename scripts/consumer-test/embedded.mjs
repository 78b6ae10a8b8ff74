/* global process */
/**
 * What the runners share, in JavaScript: the embedded servers, PGlite (PostgreSQL in WASM) served
 * for the `pg` driver and dynalite (a DynamoDB emulator), both on loopback ports, and the replay
 * check of the stores' README snippets. Kept out of the type-check: the servers' own declarations
 * are not what the consumer test checks.
 */
import { Idempotency } from "@effect-idempotency/core"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import dynalite from "dynalite"
import { Effect } from "effect"
import { deepStrictEqual, strictEqual } from "node:assert"

/** Starts PGlite on a loopback port; `url` is a connection string for it. */
export const startPostgres = async () => {
  const db = await PGlite.create()
  const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 20 })
  await server.start()
  return {
    url: `postgres://postgres@${server.getServerConn()}/postgres`,
    stop: async () => {
      await server.stop()
      await db.close()
    }
  }
}

/** Starts dynalite on a loopback port, with credentials for the SDK's default chain in the environment. */
export const startDynamoDb = async () => {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve))
  // an emulator accepts any credentials
  process.env.AWS_ACCESS_KEY_ID ??= "local"
  process.env.AWS_SECRET_ACCESS_KEY ??= "local"
  return {
    endpoint: `http://127.0.0.1:${server.address().port}`,
    stop: () => new Promise((resolve) => server.close(() => resolve(undefined)))
  }
}

/**
 * A store README's snippet, run twice: the second run returns the recorded order; then its
 * operation once more on its store, through `Idempotency.result`: a replay. Returns the first run's order.
 */
export const runTwiceThenReplay = async ({ createOrder, program, StoreLive }) => {
  const first = await Effect.runPromise(program)
  const again = await Effect.runPromise(program)
  deepStrictEqual(again, first, "the second run returns the recorded order")
  const replay = await Effect.runPromise(
    Idempotency.result(createOrder.run({ key: "3f0c5c9e-client-key", payload: { sku: "A-1", quantity: 2 } })).pipe(
      Effect.provide(StoreLive)
    )
  )
  strictEqual(replay.replayed, true, "a later run is a replay")
  return first
}
