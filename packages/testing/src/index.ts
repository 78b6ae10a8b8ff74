/**
 * @since 0.1.0
 */
export * as AdminConformance from "./AdminConformance.js"

/**
 * @since 0.1.0
 */
export * as ExitPaths from "./ExitPaths.js"

/**
 * @since 0.1.0
 */
export * as FaultyStore from "./FaultyStore.js"

/**
 * @since 0.1.0
 */
export * as PlatformModel from "./PlatformModel.js"

/**
 * @since 0.1.0
 */
export * as RetryProperty from "./RetryProperty.js"

/**
 * @since 0.1.0
 */
export * as SimulatedDownstream from "./SimulatedDownstream.js"

/**
 * @since 0.1.0
 */
export * as StoreConformance from "./StoreConformance.js"

/**
 * @since 0.1.0
 */
export * as StoreFixtures from "./StoreFixtures.js"

/**
 * @since 0.1.0
 */
export * as TcpProxy from "./TcpProxy.js"

/**
 * @since 0.1.0
 */
export * as Timing from "./Timing.js"
