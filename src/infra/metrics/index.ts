/** Prometheus metrics: the prom-client adapter of the `Metrics` port and its own listener. */
export { PrometheusMetrics, answerClusterScrapes, clusterMetricsSource, type MetricsSource, type WatchedState } from './prometheus-metrics.js';
export { startMetricsServer, type MetricsServer } from './metrics-server.js';
