import type { ClockSource, IdempotencyStore } from "@effect-idempotency/core/IdempotencyStore"
import * as SqlStoreKit from "@effect-idempotency/sql/SqlStoreKit"
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type { IdempotencyTable } from "../PgIdempotencyTable.js"
import * as Statements from "./statements.js"

/** @internal */
export interface StoreOptions {
  readonly clock: ClockSource
  readonly callTimeout: Duration.Duration
}

/** @internal */
export const storeStatements = (table: IdempotencyTable): SqlStoreKit.Statements => {
  const statements = Statements.make(table)
  return {
    reserve: { _tag: "Row", statement: { text: statements.reserve } },
    complete: { text: statements.complete },
    release: { text: statements.release },
    markFailed: { text: statements.markFailed },
    extend: { text: statements.extend },
    get: { text: statements.get },
    purgeExpired: { text: statements.purgeExpired },
    admin: {
      list: { text: statements.list },
      read: { text: statements.read },
      unblock: { _tag: "Row", statement: { text: statements.unblock } },
      stats: { text: statements.stats }
    }
  }
}

/** @internal */
export const make = (
  table: IdempotencyTable,
  options: StoreOptions
): Effect.Effect<IdempotencyStore["Type"], never, SqlClient.SqlClient> =>
  SqlStoreKit.make(storeStatements(table), { name: "PgIdempotencyStore", ...options })
