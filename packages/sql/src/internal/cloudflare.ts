import type * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection, Row } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Stream from "effect/Stream"
import { NoTransactions } from "./errors.js"

/** @internal */
export interface Raw {
  readonly rows: ReadonlyArray<Row>
  readonly changes: number
}

/** @internal */
export interface Driver {
  readonly rows: (sql: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<Row>, SqlError>
  readonly raw: (sql: string, params: ReadonlyArray<unknown>) => Effect.Effect<Raw, SqlError>
  readonly values: (
    sql: string,
    params: ReadonlyArray<unknown>
  ) => Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>, SqlError>
}

/** @internal */
export const failure = (binding: string) => (cause: unknown): SqlError =>
  new SqlError({
    cause,
    message: `${binding} failed the statement` +
      (Predicate.hasProperty(cause, "message") && typeof cause.message === "string" ? `: ${cause.message}` : "")
  })

/** @internal */
export const make = (driver: Driver, options: {
  readonly noTransactions: string
  readonly spanAttributes?: Readonly<Record<string, unknown>> | undefined
}): Effect.Effect<SqlClient.SqlClient, never, Reactivity.Reactivity> => {
  const execute: Connection["execute"] = (sql, params, transformRows) =>
    transformRows === undefined ? driver.rows(sql, params) : Effect.map(driver.rows(sql, params), transformRows)
  const connection: Connection = {
    execute,
    executeRaw: driver.raw,
    executeValues: driver.values,
    executeUnprepared: execute,
    executeStream: (sql, params, transformRows) => Stream.fromIterableEffect(execute(sql, params, transformRows))
  }
  return SqlClient.make({
    acquirer: Effect.succeed(connection),
    transactionAcquirer: Effect.failSync(() =>
      new SqlError({ message: options.noTransactions, cause: new NoTransactions(options.noTransactions) })
    ),
    compiler: Statement.makeCompilerSqlite(),
    spanAttributes: [...Object.entries(options.spanAttributes ?? {}), ["db.system.name", "sqlite"]]
  })
}
