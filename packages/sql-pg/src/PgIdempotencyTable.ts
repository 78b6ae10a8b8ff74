/**
 * The records table's name and schema, validated as `SqlIdempotencyTable` does, and quoted.
 *
 * @since 0.1.0
 */
import * as SqlIdempotencyTable from "@effect-idempotency/sql/SqlIdempotencyTable"
import * as Either from "effect/Either"

/**
 * The default table name.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_NAME: string = SqlIdempotencyTable.DEFAULT_NAME

/**
 * The longest table name accepted.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_NAME_LENGTH: number = SqlIdempotencyTable.MAX_NAME_LENGTH

/**
 * The longest schema name accepted: PostgreSQL's identifier limit.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_SCHEMA_LENGTH = 63

/**
 * Where the records live.
 *
 * @since 0.1.0
 * @category models
 */
export interface TableOptions {
  readonly table?: string | undefined
  readonly schema?: string | undefined
}

/**
 * A validated table: its names, and the quoted (schema-qualified) forms the SQL uses.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotencyTable {
  readonly name: string
  readonly schema: string | undefined
  readonly qualified: string
  readonly expiresAtIndex: string
  readonly adminIndex: string
  readonly reserveFunction: string
}

/**
 * A table or schema name that is not a plain SQL identifier, or is too long.
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidTableName: typeof SqlIdempotencyTable.InvalidTableName = SqlIdempotencyTable.InvalidTableName

/**
 * @since 0.1.0
 * @category errors
 */
export type InvalidTableName = SqlIdempotencyTable.InvalidTableName

/**
 * Quotes an identifier for PostgreSQL.
 *
 * @since 0.1.0
 * @category utils
 */
export const quote = (identifier: string): string => `"${identifier.replaceAll("\"", "\"\"")}"`

const unsafeTable = (name: string, schema: string | undefined): IdempotencyTable => {
  const qualify = (identifier: string) =>
    schema === undefined ? quote(identifier) : `${quote(schema)}.${quote(identifier)}`
  return {
    name,
    schema,
    qualified: qualify(name),
    expiresAtIndex: quote(`${name}_expires_at_idx`),
    adminIndex: quote(`${name}_admin_idx`),
    reserveFunction: qualify(`${name}_reserve`)
  }
}

/**
 * Validates a table name and an optional schema name.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options?: TableOptions): Either.Either<IdempotencyTable, InvalidTableName> =>
  Either.gen(function*() {
    const name = yield* SqlIdempotencyTable.make(options?.table)
    const schema = options?.schema === undefined
      ? undefined
      : yield* SqlIdempotencyTable.check("schema", options.schema, MAX_SCHEMA_LENGTH)
    return unsafeTable(name, schema)
  })

/**
 * The default table: `"idempotency_records"` on the connection's `search_path`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultTable: IdempotencyTable = unsafeTable(DEFAULT_NAME, undefined)
