/**
 * @since 0.1.0
 */
export * as LambdaError from "./LambdaError.js"

/**
 * @since 0.1.0
 */
export * as LambdaEvent from "./LambdaEvent.js"

/**
 * @since 0.1.0
 */
export * as LambdaHttp from "./LambdaHttp.js"

/**
 * @since 0.1.0
 */
export * as LambdaInvocation from "./LambdaInvocation.js"

/**
 * @since 0.1.0
 */
export * as LambdaSqs from "./LambdaSqs.js"

/**
 * @since 0.1.0
 */
export * as LambdaTest from "./LambdaTest.js"
