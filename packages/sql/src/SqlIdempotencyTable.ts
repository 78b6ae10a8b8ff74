/**
 * The name of the records table, validated once for every SQL store: a plain SQL identifier of at
 * most 48 characters, so that the names derived from it fit every database's identifier limit.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"

/**
 * The default table name.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_NAME = "idempotency_records"

/**
 * The longest table name accepted.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_NAME_LENGTH = 48

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * A table or schema name that is not a plain SQL identifier, or is too long.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidTableName extends Schema.TaggedError<InvalidTableName>(
  "@effect-idempotency/sql/InvalidTableName"
)("InvalidTableName", {
  kind: Schema.Literal("table", "schema"),
  name: Schema.String,
  reason: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return `Invalid ${this.kind} name ${JSON.stringify(this.name)}: ${this.reason}`
  }
}

/**
 * Checks that `name` is a plain SQL identifier of at most `maxLength` characters.
 *
 * @since 0.1.0
 * @category constructors
 */
export const check = (
  kind: InvalidTableName["kind"],
  name: string,
  maxLength: number
): Either.Either<string, InvalidTableName> => {
  if (!IDENTIFIER.test(name)) {
    return Either.left(
      new InvalidTableName({ kind, name, reason: "use a letter or _, then letters, digits or _" })
    )
  }
  if (name.length > maxLength) {
    return Either.left(new InvalidTableName({ kind, name, reason: `at most ${maxLength} characters` }))
  }
  return Either.right(name)
}

/**
 * Validates a table name (`DEFAULT_NAME` when absent).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (name?: string | undefined): Either.Either<string, InvalidTableName> =>
  check("table", name ?? DEFAULT_NAME, MAX_NAME_LENGTH)
