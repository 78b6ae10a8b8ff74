/**
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 */
export * as Cli from "./Cli.js"

/**
 * @since 0.1.0
 */
export * as CliError from "./CliError.js"

/**
 * @since 0.1.0
 */
export * as ExitCode from "./ExitCode.js"

/**
 * @since 0.1.0
 */
export * as StoreTarget from "./StoreTarget.js"
