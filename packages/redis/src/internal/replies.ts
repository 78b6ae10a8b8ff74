/**
 * The checks of the scripts' replies.
 *
 * Replies are checked by hand, element by element, against what the scripts return (a Schema of
 * tuples allocates several times more per reply): a reply of another shape (another script under
 * the same SHA, a proxy that rewrites replies) is a `StoreError` whose cause says which script and
 * which element, never what the reply held.
 *
 * @internal
 */
import { outcomeFromColumns, Status } from "@effect-idempotency/core/IdempotencyRecord"
import * as Either from "effect/Either"

/**
 * A kind of `-` is no outcome; an unknown kind (written by a newer version) reads as no outcome too.
 *
 * @internal
 */
export const outcomeOf = (kind: string, body: string) => kind === "-" ? undefined : outcomeFromColumns(kind, body)

/**
 * A reply, or why it does not have the shape its script gives.
 *
 * @internal
 */
export type Decoder<A> = (reply: unknown) => Either.Either<A, string>

const STATUSES: ReadonlySet<unknown> = new Set(Status.literals)

/**
 * The kinds of the elements of a reply.
 *
 * @internal
 */
export type Kind = "integer" | "string" | "status"

const isKind = (value: unknown, kind: Kind): boolean =>
  kind === "integer"
    ? typeof value === "number" && Number.isSafeInteger(value)
    : kind === "string"
    ? typeof value === "string"
    : STATUSES.has(value)

/**
 * `reply` as an `A` when its elements are of these kinds (those before `from` checked by the caller).
 *
 * @internal
 */
export const checked = <A>(
  script: string,
  reply: ReadonlyArray<unknown>,
  kinds: ReadonlyArray<Kind>,
  from: number
): Either.Either<A, string> => {
  if (reply.length !== kinds.length) {
    return Either.left(`the reply of the ${script} script has ${reply.length} elements, not ${kinds.length}`)
  }
  for (let i = from; i < kinds.length; i++) {
    if (!isKind(reply[i], kinds[i]!)) {
      return Either.left(
        `element ${i} of the reply of the ${script} script is not ${kinds[i] === "integer" ? "an" : "a"} ${kinds[i]}`
      )
    }
  }
  return Either.right(reply as unknown as A)
}
