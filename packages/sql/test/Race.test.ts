/**
 * Races between clients that share nothing but the database: two connection pools on the run's
 * MariaDB database, two `better-sqlite3` clients on one SQLite file (one driver per file: two copies
 * of SQLite in one process must not share a file), and two processes on one SQLite file. Whatever interleaves, each key is reserved once, and the attempts
 * that lose see the winner's record.
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { Children } from "@effect-idempotency/test-support"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomUUID } from "node:crypto"
import { fileURLToPath } from "node:url"
import type { Engine } from "./utils/databases.js"
import { layerClient, scopedDatabaseFile, uniqueTable } from "./utils/databases.js"

const CHILD = fileURLToPath(new URL("./utils/reserveChild.ts", import.meta.url))

/** A store on a client of its own, which lives as long as the test's scope. */
const store = (engine: Engine, table: string, file?: string) =>
  Effect.flatMap(
    Layer.build(layerClient(engine, file === undefined ? { maxConnections: 10 } : { file })),
    (client) => SqlIdempotencyStore.make({ table, migrate: true }).pipe(Effect.provide(client), Effect.orDie)
  )

const request = (operation: string, key: string, token: string): IdempotencyStore.ReserveRequest => ({
  id: IdempotencyRecord.makeRecordId({ operation, key: IdempotencyKey.unsafeMake(key) }),
  token,
  fingerprint: "sha256:race",
  lease: Duration.minutes(5),
  ttl: Duration.hours(1),
  takeover: true
})

/**
 * `attempts` concurrent reservations of each of `keys` keys, spread over `stores`: each key must
 * be reserved exactly once, and every other attempt must see the winner's token.
 */
const race = (stores: ReadonlyArray<IdempotencyStore.IdempotencyStore["Type"]>, keys: number, attempts: number) =>
  Effect.gen(function*() {
    const operation = `race-${randomUUID()}`
    const results = yield* Effect.forEach(
      Array.from({ length: keys * attempts }, (_, i) => i),
      (i) => {
        const key = `key-${i % keys}`
        const token = `token-${i}`
        return Effect.map(
          stores[i % stores.length]!.reserve(request(operation, key, token)),
          (result) => ({ key, token, result })
        )
      },
      { concurrency: "unbounded" }
    )
    for (let k = 0; k < keys; k++) {
      const ofKey = results.filter((r) => r.key === `key-${k}`)
      const winners = ofKey.filter((r) => r.result._tag === "Reserved")
      assert.strictEqual(winners.length, 1, `key-${k}: ${winners.length} reservations`)
      for (const loser of ofKey) {
        if (loser.result._tag === "Existing") assert.strictEqual(loser.result.record.token, winners[0]!.token)
      }
    }
  })

describe("SqlIdempotencyStore races", () => {
  it.live("MariaDB: 50 keys, 8 attempts each over two pools of 10 connections", () =>
    Effect.gen(function*() {
      const table = uniqueTable("idem_race")
      const a = yield* store("mariadb", table)
      const b = yield* store("mariadb", table)
      yield* race([a, b], 50, 8)
    }).pipe(Effect.scoped), 60_000)

  it.live(
    "SQLite: 200 keys, 4 attempts each over two better-sqlite3 clients of one file",
    () =>
      Effect.gen(function*() {
        const file = yield* scopedDatabaseFile
        const table = uniqueTable("idem_race")
        const a = yield* store("sqlite", table, file)
        const b = yield* store("sqlite", table, file)
        yield* race([a, b], 200, 4)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "SQLite: two processes reserve the same 500 keys at once; each key is reserved by exactly one",
    () =>
      Effect.gen(function*() {
        const file = yield* scopedDatabaseFile
        const table = uniqueTable("idem_race")
        // the table exists before the processes start
        yield* store("sqlite", table, file)
        const keys = 500
        const children = ["a", "b"].map((name) => {
          const child = Children.start(CHILD, [file, table, String(keys), name])
          let out = ""
          let err = ""
          child.stdout.on("data", (chunk) => (out += String(chunk)))
          child.stderr.on("data", (chunk) => (err += String(chunk)))
          const done = new Promise<ReadonlyArray<string>>((resolve, reject) =>
            child.on("exit", (code) =>
              code === 0
                ? resolve(JSON.parse(out) as ReadonlyArray<string>)
                : reject(new Error(`child ${name}: ${err}`)))
          )
          return { child, done }
        })
        yield* Effect.addFinalizer(() => Effect.sync(() => children.forEach(({ child }) => child.kill("SIGKILL"))))
        // both processes have loaded; start them together
        yield* Effect.sleep("2 seconds")
        for (const { child } of children) {
          child.stdin.write("go\n")
        }
        const [a, b] = yield* Effect.promise(() => Promise.all(children.map(({ done }) => done)))
        const both = new Set([...a!, ...b!])
        assert.strictEqual(a!.length + b!.length, keys, `a ${a!.length}, b ${b!.length}`)
        assert.strictEqual(both.size, keys)
      }).pipe(Effect.scoped),
    120_000
  )
})
