/**
 * @since 0.1.0
 */
export * as FunctionResponse from "./FunctionResponse.js"

/**
 * @since 0.1.0
 */
export * as Invocation from "./Invocation.js"

/**
 * @since 0.1.0
 */
export * as KeySource from "./KeySource.js"

/**
 * @since 0.1.0
 */
export * as NetlifyError from "./NetlifyError.js"

/**
 * @since 0.1.0
 */
export * as NetlifyFunction from "./NetlifyFunction.js"

/**
 * @since 0.1.0
 */
export * as TimeLimit from "./TimeLimit.js"
