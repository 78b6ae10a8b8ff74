import { networkErrorCodes, StoreError, StoreUnavailable } from "@effect-idempotency/core/IdempotencyError"
import type { StoreFailure } from "@effect-idempotency/core/IdempotencyError"
import * as Predicate from "effect/Predicate"

const UNAVAILABLE_REPLIES: ReadonlyArray<string> = [
  "LOADING",
  "BUSY",
  "MASTERDOWN",
  "READONLY",
  "TRYAGAIN",
  "CLUSTERDOWN"
]

const UNAVAILABLE_NAMES: ReadonlySet<string> = new Set([
  "ClientClosed",
  "MaxRetriesPerRequestError",
  "AbortError",
  "ClusterAllFailedError"
])

const UNAVAILABLE_MESSAGES: ReadonlyArray<RegExp> = [
  /^Connection is closed/,
  /^Stream isn't writeable/,
  /^Command timed out/,
  /^Socket timeout/,
  /^Ready check failed/,
  /^Cluster isn't ready/,
  /^Failed to refresh slots cache/,
  /^None of startup nodes is available/,
  /^Command aborted due to connection close/
]

const MAX_DEPTH = 8

const stringProperty = (u: object, key: string): string | undefined =>
  Predicate.hasProperty(u, key) && typeof u[key] === "string" ? u[key] : undefined

/** @internal */
export const isUnavailable = (u: unknown, depth = 0): boolean => {
  if (depth > MAX_DEPTH || !Predicate.isObject(u)) return false
  const code = stringProperty(u, "code")
  if (code !== undefined && networkErrorCodes.has(code)) return true
  const name = stringProperty(u, "name")
  if (name !== undefined && UNAVAILABLE_NAMES.has(name)) return true
  const message = stringProperty(u, "message")
  if (message !== undefined) {
    if (name === "ReplyError") {
      // a server's error reply: its first word alone decides (the rest may quote data)
      const word = message.split(" ", 1)[0]!
      return UNAVAILABLE_REPLIES.includes(word)
    }
    if (UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(message))) return true
  }
  return (Predicate.hasProperty(u, "lastNodeError") && isUnavailable(u.lastNodeError, depth + 1)) ||
    (Predicate.hasProperty(u, "cause") && isUnavailable(u.cause, depth + 1))
}

/** @internal */
export const toStoreFailure = (method: string) => (cause: unknown): StoreFailure =>
  isUnavailable(cause) ? new StoreUnavailable({ method, cause }) : new StoreError({ method, cause })
