/**
 * The PGlite server the tests run on when no PostgreSQL is named (test-support's `PgliteServer`):
 * PGlite is one session, so connections that send queries at the same time, some inside
 * transactions, must each get the rows of their own statement, never another connection's.
 */
import * as PgliteServer from "@effect-idempotency/test-support/PgliteServer"
import { assert, describe, it } from "@effect/vitest"
import { PGlite } from "@electric-sql/pglite"
import * as Effect from "effect/Effect"
import pg from "pg"

/** `rounds` queries on a connection of its own, each answering with its own tag; inside a transaction or not. */
const client = (url: string, name: string, transactions: boolean, rounds: number) =>
  Effect.promise(async () => {
    const connection = new pg.Client({ connectionString: url })
    await connection.connect()
    const wrong: Array<string> = []
    try {
      for (let i = 0; i < rounds; i++) {
        const tag = `${name}-${i}`
        try {
          if (transactions) await connection.query("BEGIN")
          // the statement's text differs per connection, its parameter per round: both must come back
          const { rows } = await connection.query(`SELECT $1::text AS tag, '${name}' AS name`, [tag])
          if (transactions) await connection.query("COMMIT")
          if (rows[0]?.tag !== tag || rows[0]?.name !== name) wrong.push(`${tag}: ${JSON.stringify(rows)}`)
        } catch (error) {
          wrong.push(`${tag}: ${String(error)}`)
          if (transactions) await connection.query("ROLLBACK").catch(() => {})
        }
      }
    } finally {
      await connection.end()
    }
    return wrong
  })

/** A new PGlite, served until the scope closes. */
const served = Effect.flatMap(
  Effect.acquireRelease(Effect.promise(() => PGlite.create()), (db) => Effect.promise(() => db.close())),
  (db) => PgliteServer.serve(db)
)

describe("PgliteServer", () => {
  it.scoped(
    "connections with and without transactions at once: each gets its own statement's rows",
    () =>
      Effect.gen(function*() {
        const { url } = yield* served
        const clients = ["a", "b", "c", "d", "e", "f"].map((name, i) => client(url, name, i % 2 === 0, 150))
        const wrong = (yield* Effect.all(clients, { concurrency: "unbounded" })).flat()
        assert.deepStrictEqual(wrong.slice(0, 5), [])
      }),
    60_000
  )

  it.scoped(
    "a connection closed inside its transaction: rolled back, and the next connection is served",
    () =>
      Effect.gen(function*() {
        const { url } = yield* served
        yield* Effect.promise(async () => {
          const setup = new pg.Client({ connectionString: url })
          await setup.connect()
          await setup.query("CREATE TABLE t (n int)")
          await setup.end()
          const dying = new pg.Client({ connectionString: url })
          await dying.connect()
          dying.on("error", () => {})
          await dying.query("BEGIN")
          await dying.query("INSERT INTO t VALUES (1)") // the socket goes without COMMIT, as a killed process's does
          ;(dying as unknown as { connection: { stream: { destroy: () => void } } }).connection.stream.destroy()
        })
        const rows = yield* Effect.promise(async () => {
          const next = new pg.Client({ connectionString: url })
          await next.connect()
          const { rows } = await next.query("SELECT count(*)::int AS n FROM t")
          await next.end()
          return rows
        })
        assert.deepStrictEqual(rows, [{ n: 0 }])
      }),
    30_000
  )
})
