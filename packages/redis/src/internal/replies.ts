/**
 * Replies are checked by hand: a Schema of tuples allocates several times more per reply.
 *
 * @internal
 */
import { outcomeFromColumns, Status } from "@effect-idempotency/core/IdempotencyRecord"
import * as Either from "effect/Either"

/** @internal */
export const outcomeOf = (kind: string, body: string) => kind === "-" ? undefined : outcomeFromColumns(kind, body)

/** @internal */
export type Decoder<A> = (reply: unknown) => Either.Either<A, string>

const STATUSES: ReadonlySet<unknown> = new Set(Status.literals)

/** @internal */
export type Kind = "integer" | "string" | "status"

const isKind = (value: unknown, kind: Kind): boolean =>
  kind === "integer"
    ? typeof value === "number" && Number.isSafeInteger(value)
    : kind === "string"
    ? typeof value === "string"
    : STATUSES.has(value)

/** @internal */
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
