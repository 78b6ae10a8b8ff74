/**
 * The reservation's corners that the shared suites do not reach:
 *
 * - MariaDB: the statement holds whatever `sql_mode` the session has. Under
 *   `SIMULTANEOUS_ASSIGNMENT` each column would read the old token, and a mode that is not strict
 *   would truncate a long id into another key's record.
 * - SQLite: the record changes between the upsert that wrote nothing and the read that explains
 *   it (another attempt releases or takes it in between); the reservation runs again, and gives up
 *   with a `StoreError` when the record changes in each of its rounds.
 */
import { IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { StoreFixtures } from "@effect-idempotency/testing"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { layerClient, scopedDatabaseFile, uniqueTable } from "./utils/databases.js"

const { expectExisting, expectReserved, FP_A, reserveRequest } = StoreFixtures

const idOf = (operation: string, key: string) =>
  IdempotencyRecord.makeRecordId({ operation, key: IdempotencyKey.unsafeMake(key) })

/** A store on a MariaDB pool of one connection, and that connection's client (for its session's settings). */
const mariaDbSession = Effect.gen(function*() {
  const client = yield* Layer.build(layerClient("mariadb", { maxConnections: 1 }))
  const store = yield* SqlIdempotencyStore.make({ table: uniqueTable("idem_mode"), migrate: true }).pipe(
    Effect.provide(client),
    Effect.orDie
  )
  return { sql: Context.get(client, SqlClient.SqlClient), store }
})

describe("SqlIdempotencyStore reservation", () => {
  for (const mode of ["SIMULTANEOUS_ASSIGNMENT", "STRICT_ALL_TABLES,SIMULTANEOUS_ASSIGNMENT"]) {
    it.scoped(`MariaDB under sql_mode ${mode}: a FAILED record is taken over by exactly one attempt`, () =>
      Effect.gen(function*() {
        const { sql, store } = yield* mariaDbSession
        const id = StoreFixtures.freshId()
        // one connection, in a transaction, so that the session's mode holds for every statement
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql.unsafe(`SET SESSION sql_mode = '${mode}'`).withoutTransform
          const first = expectReserved(yield* store.reserve(reserveRequest(id, { fingerprint: FP_A })))
          yield* store.markFailed({ id, token: first.token, ttl: Duration.hours(1) })
          const second = expectReserved(yield* store.reserve(reserveRequest(id, { fingerprint: FP_A })))
          assert.strictEqual(second.attempt, 2)
          const third = expectExisting(yield* store.reserve(reserveRequest(id, { fingerprint: FP_A })))
          assert.strictEqual(third.record.token, second.token)
          assert.strictEqual(third.record.status, "IN_PROGRESS")
          yield* sql.unsafe("SET SESSION sql_mode = DEFAULT").withoutTransform
        })).pipe(Effect.orDie)
      }))
  }

  it.scoped("MariaDB under a sql_mode that is not strict: an id too long is a StoreError, not another key's record", () =>
    Effect.gen(function*() {
      const { sql, store } = yield* mariaDbSession
      const operation = "o".repeat(3000)
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql.unsafe("SET SESSION sql_mode = ''").withoutTransform
        const first = yield* Effect.either(store.reserve(reserveRequest(idOf(operation, "key-1"))))
        const second = yield* Effect.either(store.reserve(reserveRequest(idOf(operation, "key-2"))))
        for (const result of [first, second]) {
          assert.isTrue(result._tag === "Left" && result.left._tag === "StoreError", JSON.stringify(result))
        }
        yield* sql.unsafe("SET SESSION sql_mode = DEFAULT").withoutTransform
      })).pipe(Effect.orDie)
    }))

  /**
   * A store on SQLite whose every read of the reservation first runs `beforeRead`, and whose every
   * upsert first runs `beforeInsert`, on a second client of the same file: the writes of another
   * attempt, between the reservation's two statements.
   */
  const interfered = (hooks: {
    readonly beforeInsert?: (other: SqlClient.SqlClient, table: string) => Effect.Effect<unknown, unknown>
    readonly beforeRead?: (other: SqlClient.SqlClient, table: string) => Effect.Effect<unknown, unknown>
  }) =>
    Effect.gen(function*() {
      const file = yield* scopedDatabaseFile
      const table = uniqueTable("idem_rounds")
      const client = Context.get(yield* Layer.build(layerClient("sqlite", { file })), SqlClient.SqlClient)
      const other = Context.get(yield* Layer.build(layerClient("sqlite", { file })), SqlClient.SqlClient)
      const counts = { inserts: 0, reads: 0 }
      const hook = (statement: ReturnType<SqlClient.SqlClient["unsafe"]>, before: Effect.Effect<unknown, unknown>) =>
        new Proxy(statement, {
          get: (target, property, receiver) => {
            const value = Reflect.get(target, property, receiver)
            return property === "withoutTransform" ? Effect.zipRight(Effect.orDie(before), value) : value
          }
        })
      const proxy = new Proxy(client, {
        get: (target, property, receiver) => {
          const value = Reflect.get(target, property, receiver)
          if (property !== "unsafe") return value
          return (text: string, params?: ReadonlyArray<unknown>) => {
            const statement = target.unsafe(text, params)
            if (text.startsWith(`INSERT INTO "${table}" AS r`)) {
              counts.inserts++
              return hooks.beforeInsert === undefined ? statement : hook(statement, hooks.beforeInsert(other, table))
            }
            if (text.startsWith("SELECT c.now")) {
              counts.reads++
              return hooks.beforeRead === undefined ? statement : hook(statement, hooks.beforeRead(other, table))
            }
            return statement
          }
        }
      })
      const store = yield* SqlIdempotencyStore.make({ table, migrate: true }).pipe(
        Effect.provideService(SqlClient.SqlClient, proxy),
        Effect.orDie
      )
      return { store, counts }
    })

  it.scoped("SQLite: a record released between the upsert and the read is reserved in the next round", () =>
    Effect.gen(function*() {
      let interfere = false
      const { counts, store } = yield* interfered({
        beforeRead: (other, table) =>
          interfere
            ? Effect.sync(() => {
              interfere = false
            }).pipe(Effect.zipRight(other.unsafe(`DELETE FROM "${table}"`).withoutTransform))
            : Effect.void
      })
      const id = StoreFixtures.freshId()
      // another attempt holds the key (a new key: the upsert reserves it, no read)
      expectReserved(yield* store.reserve(reserveRequest(id)))
      interfere = true
      const before = { ...counts }
      const result = expectReserved(yield* store.reserve(reserveRequest(id)))
      assert.strictEqual(result.attempt, 1)
      assert.deepStrictEqual({ inserts: counts.inserts - before.inserts, reads: counts.reads - before.reads }, {
        inserts: 2,
        reads: 1
      })
    }))

  it.scoped("SQLite: a record that changes during each of 5 rounds is a StoreError, never a reservation", () =>
    Effect.gen(function*() {
      const id = StoreFixtures.freshId()
      const live = (other: SqlClient.SqlClient, table: string) =>
        // another attempt's live record, in place before each upsert
        other.unsafe(
          `INSERT OR REPLACE INTO "${table}" (id, operation, scope, "key", status, token, fingerprint, attempt,
            lease_until, expires_at, created_at, updated_at)
          VALUES (?, ?, NULL, ?, 'IN_PROGRESS', 'other', 'sha256:other', 1, 9e15, 9e15, 0, 0)`,
          [id.value, id.operation, id.key]
        ).withoutTransform
      const { counts, store } = yield* interfered({
        beforeInsert: live,
        // and gone before each read
        beforeRead: (other, table) => other.unsafe(`DELETE FROM "${table}"`).withoutTransform
      })
      const result = yield* Effect.either(store.reserve(reserveRequest(id)))
      assert.isTrue(result._tag === "Left" && result.left._tag === "StoreError", JSON.stringify(result))
      assert.deepStrictEqual(counts, { inserts: 5, reads: 5 })
    }))
})
