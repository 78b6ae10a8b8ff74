/**
 * Where an idempotent function finds the key of a request: a header, or a value derived from the payload.
 *
 * @since 0.1.0
 */
import { dual } from "effect/Function"
import * as Option from "effect/Option"
import type { Pipeable } from "effect/Pipeable"
import { pipeArguments } from "effect/Pipeable"
import type { Invocation } from "./Invocation.js"

/**
 * The header a client key is read from.
 *
 * @since 0.1.0
 * @category constants
 */
export const HEADER = "Idempotency-Key"

/**
 * A source of keys.
 *
 * @since 0.1.0
 * @category models
 */
export interface KeySource<in P> extends Pipeable {
  readonly description: string
  readonly required: boolean
  readonly read: (payload: P, invocation: Invocation["Type"]) => Option.Option<string>
}

const Proto: Pipeable = {
  pipe() {
    return pipeArguments(this, arguments)
  }
}

/**
 * Builds a key source.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P>(options: {
  readonly description: string
  readonly required: boolean
  readonly read: (payload: P, invocation: Invocation["Type"]) => Option.Option<string>
}): KeySource<P> => Object.assign(Object.create(Proto), options)

/**
 * The key from a request header (`Idempotency-Key` by default), required by default.
 *
 * @since 0.1.0
 * @category constructors
 */
export const header = (options?: {
  readonly name?: string | undefined
  readonly required?: boolean | undefined
}): KeySource<unknown> => {
  const name = options?.name ?? HEADER
  return make({
    description: `the ${name} header`,
    required: options?.required ?? true,
    read: (_, invocation) => Option.fromNullable(invocation.request.headers.get(name))
  })
}

/**
 * A key derived from the decoded payload or the invocation, required by default.
 *
 * @since 0.1.0
 * @category constructors
 */
export const derive = <P>(
  f: (payload: P, invocation: Invocation["Type"]) => string | undefined,
  options?: { readonly description?: string | undefined; readonly required?: boolean | undefined }
): KeySource<P> =>
  make({
    description: options?.description ?? "a key derived from the request",
    required: options?.required ?? true,
    read: (payload, invocation) => Option.fromNullable(f(payload, invocation))
  })

/**
 * The key of `self`, or else of `that`; required if either is.
 *
 * @since 0.1.0
 * @category combinators
 */
export const orElse: {
  <P2>(that: KeySource<P2>): <P1>(self: KeySource<P1>) => KeySource<P1 & P2>
  <P1, P2>(self: KeySource<P1>, that: KeySource<P2>): KeySource<P1 & P2>
} = dual(2, <P1, P2>(self: KeySource<P1>, that: KeySource<P2>): KeySource<P1 & P2> =>
  make({
    description: `${self.description} or ${that.description}`,
    required: self.required || that.required,
    read: (payload, invocation) => Option.orElse(self.read(payload, invocation), () => that.read(payload, invocation))
  }))
