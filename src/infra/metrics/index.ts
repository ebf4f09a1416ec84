/** Prometheus metrics: the prom-client adapter of the `Metrics` port (its listener is `http/metrics-server.ts`). */
export { PrometheusMetrics, answerClusterScrapes, clusterMetricsSource, type WatchedState } from './prometheus-metrics.js';
