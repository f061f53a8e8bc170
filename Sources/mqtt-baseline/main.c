// mqtt-baseline: what libmosquitto and a local Mosquitto manage without BeaconBridge,
// the ceiling `beaconctl bench` compares the gateway and the brain with (docs/PERFORMANCE.md).
//
//   mqtt-baseline pub  --port P [--count N] [--beacons B] [--rate R]
//       publishes N sighting-shaped JSON messages (QoS 0) to beacons/100/<1..B> as fast as
//       libmosquitto takes them (or R a second), while a subscriber on beacons/+/+ in the
//       same process counts them: the broker's end-to-end rate.
//   mqtt-baseline sub  --port P [--count N] [--filter F]... [--idle S] [--latency-out FILE]
//       a counting subscriber for someone else's publisher (of every --filter given, up to 16;
//       default beacons/+/+): prints "ready" once subscribed,
//       then a JSON summary; with --latency-out, one "minor seq monotonic-ns" line per
//       message (seq read from the payload's "seq").
//   mqtt-baseline rtt  --port P [--count N]
//       one message at a time (QoS 1, as joins and replies) from a publisher to a subscriber
//       through the broker: the broker's own loopback latency.
//   mqtt-baseline join --port P [--count N] [--burst J] [--stores S] [--id ID] [--interval S]
//       an observer app: joins beacons/<store>/<minor>/observers/<client> and waits for the
//       brain's reply on observers/<client>/inbox, one at a time (latency; a join every S
//       seconds at most), then J joins at once (joins answered per second); every join is
//       left again. ID names the MQTT client and prefixes the observer names (default bench).
//   mqtt-baseline flood --port P [--count N]
//       a join flood: N joins (QoS 1, retained, with a profile) from N different observer
//       names flood-<i> to beacons/100/<1..1000>, published as fast as the broker takes them;
//       waits for the brain's N replies, then leaves every join again (and waits until the broker has
//       acknowledged every leave).
//   mqtt-baseline sub also reports the topic and payload bytes it received.
//
// Every result is one JSON line on stdout. Times are CLOCK_MONOTONIC. Loopback only.
#define _GNU_SOURCE
#include <mosquitto.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what, int code) {
    fprintf(stderr, "mqtt-baseline: %s: %s\n", what, mosquitto_strerror(code));
    exit(1);
}

// ---- A client whose callbacks signal a condition variable ----

struct client {
    struct mosquitto *mosq;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int connected;
    int subscribed;
    // Counting.
    long received;
    long bytes;
    double first;
    double last;
    // Latency records (sub --latency-out).
    int64_t *records;
    long capacity;
    // Replies (join, rtt): the topic waited for, and whether it arrived.
    char awaited[256];
    int arrived;
    long replies;
    double last_reply;
    // Only inbox topics starting with this count as replies (flood: not someone else's).
    const char *reply_prefix;
    // QoS 1 publishes the broker has acknowledged.
    long acked;
    // Connections the broker accepted, and the filters to subscribe again on each after the
    // first (sub): libmosquitto's thread reconnects by itself, with a clean session.
    long connections;
    // Subscriptions the broker refused (SUBACK 0x80).
    long refused;
    const char **filters;
    int nfilters;
};

static void on_connect(struct mosquitto *mosq, void *context, int rc) {
    struct client *c = context;
    pthread_mutex_lock(&c->lock);
    c->connected = rc == 0 ? 1 : -1;
    if (rc == 0) c->connections++;
    int again = rc == 0 && c->connections > 1;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
    // A clean session forgot the subscriptions: make them again, or nothing more arrives.
    for (int i = 0; again && i < c->nfilters; i++) mosquitto_subscribe(mosq, NULL, c->filters[i], 0);
}

static void on_subscribe(struct mosquitto *mosq, void *context, int mid, int count, const int *granted) {
    (void)mosq; (void)mid;
    struct client *c = context;
    pthread_mutex_lock(&c->lock);
    // 0x80: the broker refused the subscription (MQTT 3.1.1 SUBACK failure).
    for (int i = 0; i < count; i++) if (granted[i] == 0x80) c->refused++;
    c->subscribed = 1;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

static void on_publish(struct mosquitto *mosq, void *context, int mid) {
    (void)mosq; (void)mid;
    struct client *c = context;
    pthread_mutex_lock(&c->lock);
    c->acked++;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

static long field(const struct mosquitto_message *m, const char *key) {
    const char *found = memmem(m->payload, (size_t)m->payloadlen, key, strlen(key));
    if (!found) return -1;
    return strtol(found + strlen(key), NULL, 10);
}

static void on_message(struct mosquitto *mosq, void *context, const struct mosquitto_message *m) {
    (void)mosq;
    struct client *c = context;
    double t = now();
    pthread_mutex_lock(&c->lock);
    if (c->received == 0) c->first = t;
    c->last = t;
    if (c->records && c->received < c->capacity) {
        const char *minor = strrchr(m->topic, '/');
        c->records[3 * c->received] = minor ? strtol(minor + 1, NULL, 10) : -1;
        c->records[3 * c->received + 1] = m->payloadlen > 0 ? field(m, "\"seq\":") : -1;
        c->records[3 * c->received + 2] = now_ns();
    }
    c->received++;
    c->bytes += (long)strlen(m->topic) + m->payloadlen;
    if (c->awaited[0] && strcmp(m->topic, c->awaited) == 0) c->arrived = 1;
    if (strstr(m->topic, "/inbox") && (!c->reply_prefix || !strncmp(m->topic, c->reply_prefix, strlen(c->reply_prefix)))) {
        c->replies++;
        c->last_reply = t;
    }
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

static void client_start(struct client *c, const char *id, int port) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->changed, NULL);
    c->mosq = mosquitto_new(id, true, c);
    if (!c->mosq) die("mosquitto_new", MOSQ_ERR_NOMEM);
    mosquitto_connect_callback_set(c->mosq, on_connect);
    mosquitto_subscribe_callback_set(c->mosq, on_subscribe);
    mosquitto_message_callback_set(c->mosq, on_message);
    mosquitto_publish_callback_set(c->mosq, on_publish);
    // As BeaconBridge's MQTTClient: no Nagle, so a small message never waits for an ACK.
    mosquitto_int_option(c->mosq, MOSQ_OPT_TCP_NODELAY, 1);
    int rc = mosquitto_connect(c->mosq, "127.0.0.1", port, 60);
    if (rc != MOSQ_ERR_SUCCESS) die("connect", rc);
    rc = mosquitto_loop_start(c->mosq);
    if (rc != MOSQ_ERR_SUCCESS) die("loop_start", rc);
    pthread_mutex_lock(&c->lock);
    while (c->connected == 0) pthread_cond_wait(&c->changed, &c->lock);
    int ok = c->connected == 1;
    pthread_mutex_unlock(&c->lock);
    if (!ok) die("connect", MOSQ_ERR_CONN_REFUSED);
}

static void client_subscribe(struct client *c, const char *filter, int qos) {
    pthread_mutex_lock(&c->lock);
    c->subscribed = 0;
    pthread_mutex_unlock(&c->lock);
    int rc = mosquitto_subscribe(c->mosq, NULL, filter, qos);
    if (rc != MOSQ_ERR_SUCCESS) die("subscribe", rc);
    pthread_mutex_lock(&c->lock);
    while (!c->subscribed) pthread_cond_wait(&c->changed, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

static void client_stop(struct client *c) {
    mosquitto_disconnect(c->mosq);
    mosquitto_loop_stop(c->mosq, false);
    mosquitto_destroy(c->mosq);
}

/// Waits until `done(c)` or `idle` seconds pass without a message (or `limit` in all).
static void wait_for(struct client *c, int (*done)(struct client *, long), long goal, double idle, double limit) {
    double start = now();
    pthread_mutex_lock(&c->lock);
    long seen = c->received;
    double last_change = now();
    while (!done(c, goal)) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_nsec += 20 * 1000000;
        if (deadline.tv_nsec >= 1000000000) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000; }
        pthread_cond_timedwait(&c->changed, &c->lock, &deadline);
        double t = now();
        if (c->received != seen) { seen = c->received; last_change = t; }
        if ((c->received > 0 && t - last_change > idle) || t - start > limit) break;
    }
    pthread_mutex_unlock(&c->lock);
}

/// Waits until the broker has acknowledged `goal` QoS 1 publishes (or `limit` seconds pass):
/// a disconnect would drop those libmosquitto still holds back.
static void wait_acknowledged(struct client *c, long goal, double limit) {
    double start = now();
    pthread_mutex_lock(&c->lock);
    while (c->acked < goal && now() - start < limit) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_nsec += 20 * 1000000;
        if (deadline.tv_nsec >= 1000000000) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000; }
        pthread_cond_timedwait(&c->changed, &c->lock, &deadline);
    }
    pthread_mutex_unlock(&c->lock);
}

static int received_all(struct client *c, long goal) { return c->received >= goal; }
static int arrived(struct client *c, long goal) { (void)goal; return c->arrived; }
static int replies_all(struct client *c, long goal) { return c->replies >= goal; }

/// A sighting as the gateway writes it (same keys, same size give or take a digit).
static int sighting(char *out, size_t size, long minor, long seq) {
    return snprintf(out, size,
                    "{\"uuid\":\"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\",\"major\":100,\"minor\":%ld,"
                    "\"gateway\":\"bench\",\"address\":\"C0:00:00:00:%02lX:%02lX\",\"rssi\":-63,"
                    "\"rssiSmoothed\":-62.4,\"txPower\":-59,\"distance\":1.58,\"proximity\":\"near\","
                    "\"ts\":\"2026-11-21T09:00:00.000Z\",\"seq\":%ld}",
                    minor, (minor >> 8) & 0xFF, minor & 0xFF, seq);
}

/* A gateway's RSSI report (gateways/<id>/rssi) of window `window` (0.25 s each from
   2026-11-21T09:00:00Z) in which it heard beacon `minor` twice. */
static int rssi_report(char *out, size_t size, long gateway, long window, long minor) {
    char from[32], to[32];
    for (int k = 0; k < 2; k++) {
        long quarter = window + k;
        time_t seconds = (time_t)1795251600 + quarter / 4;
        struct tm tm;
        gmtime_r(&seconds, &tm);
        char *text = k ? to : from;
        size_t n = strftime(text, 32, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(text + n, 32 - n, ".%03ldZ", (quarter % 4) * 250);
    }
    return snprintf(out, size,
                    "{\"gateway\":\"bench-%ld\",\"from\":\"%s\",\"to\":\"%s\",\"beacons\":[{\"major\":100,\"minor\":%ld,"
                    "\"uuid\":\"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\",\"n\":2,\"rssi\":-63.5,\"at\":0.125,"
                    "\"rssiSmoothed\":-62.4,\"distance\":1.58,\"proximity\":\"near\"}]}",
                    gateway, from, to, minor);
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_latencies(const char *name, double *values, long n) {
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    double median = n ? values[n / 2] : 0;
    double p99 = n ? values[(long)((double)(n - 1) * 0.99)] : 0;
    double max = n ? values[n - 1] : 0;
    printf("\"%s\":{\"count\":%ld,\"medianMs\":%.3f,\"p99Ms\":%.3f,\"maxMs\":%.3f}", name, n,
           median * 1e3, p99 * 1e3, max * 1e3);
}

// ---- Modes ----

/* Sightings on beacons/100/<minor>, or (`reports`) the RSSI reports of 4 gateways,
   one beacon each, their windows moving on. */
static int mode_pub(int port, long count, long beacons, double rate, int reports) {
    struct client subscriber, publisher;
    client_start(&subscriber, "baseline-sub", port);
    client_subscribe(&subscriber, reports ? "gateways/+/rssi" : "beacons/+/+", 0);
    client_start(&publisher, "baseline-pub", port);
    char topic[64], payload[512];
    double start = now();
    for (long i = 0; i < count; i++) {
        // --rate: no faster than that many messages a second (0: as fast as possible).
        while (rate > 0 && now() - start < (double)i / rate) {}
        long minor = i % beacons + 1;
        int length;
        if (reports) {
            snprintf(topic, sizeof topic, "gateways/bench-%ld/rssi", i % 4);
            length = rssi_report(payload, sizeof payload, i % 4, i / 4, (i / 4) % beacons + 1);
        } else {
            snprintf(topic, sizeof topic, "beacons/100/%ld", minor);
            length = sighting(payload, sizeof payload, minor, i / beacons + 1);
        }
        int rc;
        while ((rc = mosquitto_publish(publisher.mosq, NULL, topic, length, payload, 0, false)) == MOSQ_ERR_NOMEM) {
            usleep(100);
        }
        if (rc != MOSQ_ERR_SUCCESS) die("publish", rc);
    }
    double published = now();
    wait_for(&subscriber, received_all, count, 3, 120);
    pthread_mutex_lock(&subscriber.lock);
    long received = subscriber.received;
    double last = subscriber.last;
    pthread_mutex_unlock(&subscriber.lock);
    double seconds = last - start;
    printf("{\"mode\":\"pub\",\"sent\":%ld,\"received\":%ld,\"publishSeconds\":%.6f,\"endToEndSeconds\":%.6f,"
           "\"publishedPerSecond\":%.0f,\"messagesPerSecond\":%.0f,\"payloadBytes\":%d}\n",
           count, received, published - start, seconds, (double)count / (published - start),
           seconds > 0 ? (double)received / seconds : 0,
           reports ? rssi_report(payload, sizeof payload, 0, 0, 1) : sighting(payload, sizeof payload, 1, 1));
    client_stop(&publisher);
    client_stop(&subscriber);
    return received == count ? 0 : 1;
}

static int mode_sub(int port, long count, const char **filters, int nfilters, double idle, const char *latency_out) {
    struct client c;
    client_start(&c, NULL, port);
    if (latency_out) {
        c.records = calloc((size_t)count * 3, sizeof(int64_t));
        c.capacity = count;
    }
    for (int i = 0; i < nfilters; i++) client_subscribe(&c, filters[i], 0);
    pthread_mutex_lock(&c.lock);
    c.filters = filters;
    c.nfilters = nfilters;
    pthread_mutex_unlock(&c.lock);
    printf("ready\n");
    fflush(stdout);
    // Waits for the first message for as long as the other side takes to start.
    wait_for(&c, received_all, count, idle, 600);
    pthread_mutex_lock(&c.lock);
    long received = c.received;
    double first = c.first, last = c.last;
    pthread_mutex_unlock(&c.lock);
    if (latency_out) {
        FILE *file = fopen(latency_out, "w");
        if (!file) { perror(latency_out); return 1; }
        long n = received < c.capacity ? received : c.capacity;
        for (long i = 0; i < n; i++) {
            fprintf(file, "%ld %ld %lld\n", (long)c.records[3 * i], (long)c.records[3 * i + 1],
                    (long long)c.records[3 * i + 2]);
        }
        fclose(file);
    }
    pthread_mutex_lock(&c.lock);
    long connections = c.connections;
    long refused = c.refused;
    pthread_mutex_unlock(&c.lock);
    printf("{\"mode\":\"sub\",\"received\":%ld,\"bytes\":%ld,\"first\":%.9f,\"last\":%.9f,\"connections\":%ld,"
           "\"refused\":%ld}\n", received, c.bytes, first, last, connections, refused);
    fflush(stdout);
    client_stop(&c);
    return 0;
}

static int mode_rtt(int port, long count) {
    struct client subscriber, publisher;
    client_start(&subscriber, "baseline-rtt-sub", port);
    client_subscribe(&subscriber, "bench/rtt/+", 1);
    client_start(&publisher, "baseline-rtt-pub", port);
    double *latencies = calloc((size_t)count, sizeof(double));
    char payload[512];
    int length = sighting(payload, sizeof payload, 1, 1);
    long n = 0;
    for (long i = 0; i < count; i++) {
        pthread_mutex_lock(&subscriber.lock);
        snprintf(subscriber.awaited, sizeof subscriber.awaited, "bench/rtt/%ld", i % 100);
        subscriber.arrived = 0;
        pthread_mutex_unlock(&subscriber.lock);
        double start = now();
        int rc = mosquitto_publish(publisher.mosq, NULL, subscriber.awaited, length, payload, 1, false);
        if (rc != MOSQ_ERR_SUCCESS) die("publish", rc);
        wait_for(&subscriber, arrived, 0, 2, 2);
        pthread_mutex_lock(&subscriber.lock);
        if (subscriber.arrived) latencies[n++] = now() - start;
        pthread_mutex_unlock(&subscriber.lock);
    }
    printf("{\"mode\":\"rtt\",");
    print_latencies("latency", latencies, n);
    printf("}\n");
    client_stop(&publisher);
    client_stop(&subscriber);
    return n == count ? 0 : 1;
}

static int mode_join(int port, long count, long burst, long stores, const char *id, double interval) {
    struct client c;
    client_start(&c, id, port);
    client_subscribe(&c, "observers/+/inbox", 1);
    double *latencies = calloc((size_t)count, sizeof(double));
    char topic[128], inbox[128];
    const char *join = "{\"state\":\"joined\",\"profile\":{\"name\":\"Ada\",\"favorite\":\"flat white\"}}";
    long n = 0;
    double begin = now();
    for (long i = 0; i < count; i++) {
        while (interval > 0 && now() - begin < (double)i * interval) usleep(200);
        long store = 100 + i % stores, minor = i / stores % 1000 + 1;
        snprintf(topic, sizeof topic, "beacons/%ld/%ld/observers/%s-%ld", store, minor, id, i);
        snprintf(inbox, sizeof inbox, "observers/%s-%ld/inbox", id, i);
        pthread_mutex_lock(&c.lock);
        snprintf(c.awaited, sizeof c.awaited, "%s", inbox);
        c.arrived = 0;
        pthread_mutex_unlock(&c.lock);
        double start = now();
        int rc = mosquitto_publish(c.mosq, NULL, topic, (int)strlen(join), join, 1, true);
        if (rc != MOSQ_ERR_SUCCESS) die("publish", rc);
        wait_for(&c, arrived, 0, 5, 5);
        pthread_mutex_lock(&c.lock);
        if (c.arrived) latencies[n++] = now() - start;
        pthread_mutex_unlock(&c.lock);
        mosquitto_publish(c.mosq, NULL, topic, 0, NULL, 1, true);
    }
    // The burst: every join at once, then count the replies.
    pthread_mutex_lock(&c.lock);
    c.awaited[0] = 0;
    c.replies = 0;
    pthread_mutex_unlock(&c.lock);
    double start = now();
    for (long i = 0; i < burst; i++) {
        long store = 100 + i % stores, minor = i / stores % 1000 + 1;
        snprintf(topic, sizeof topic, "beacons/%ld/%ld/observers/%s-burst-%ld", store, minor, id, i);
        int rc;
        while ((rc = mosquitto_publish(c.mosq, NULL, topic, (int)strlen(join), join, 1, true)) == MOSQ_ERR_NOMEM) {
            usleep(100);
        }
        if (rc != MOSQ_ERR_SUCCESS) die("publish", rc);
    }
    wait_for(&c, replies_all, burst, 5, 120);
    pthread_mutex_lock(&c.lock);
    long replies = c.replies;
    double last = c.last_reply;
    pthread_mutex_unlock(&c.lock);
    for (long i = 0; i < burst; i++) {
        long store = 100 + i % stores, minor = i / stores % 1000 + 1;
        snprintf(topic, sizeof topic, "beacons/%ld/%ld/observers/%s-burst-%ld", store, minor, id, i);
        mosquitto_publish(c.mosq, NULL, topic, 0, NULL, 1, true);
    }
    printf("{\"mode\":\"join\",");
    print_latencies("joinToReply", latencies, n);
    printf(",\"burst\":%ld,\"replies\":%ld,\"burstSeconds\":%.6f,\"joinsPerSecond\":%.0f}\n", burst, replies,
           last - start, replies > 0 && last > start ? (double)replies / (last - start) : 0);
    usleep(200000);
    client_stop(&c);
    return n == count && replies == burst ? 0 : 1;
}

static int mode_flood(int port, long count) {
    struct client c;
    client_start(&c, "baseline-flood", port);
    c.reply_prefix = "observers/flood-";
    client_subscribe(&c, "observers/+/inbox", 1);
    char topic[128];
    const char *join = "{\"state\":\"joined\",\"profile\":{\"name\":\"Flood\",\"favorite\":\"everything\"}}";
    pthread_mutex_lock(&c.lock);
    c.replies = 0;
    pthread_mutex_unlock(&c.lock);
    double start = now();
    for (long i = 0; i < count; i++) {
        snprintf(topic, sizeof topic, "beacons/100/%ld/observers/flood-%ld", i % 1000 + 1, i);
        int rc;
        while ((rc = mosquitto_publish(c.mosq, NULL, topic, (int)strlen(join), join, 1, true)) == MOSQ_ERR_NOMEM) {
            usleep(100);
        }
        if (rc != MOSQ_ERR_SUCCESS) die("publish", rc);
    }
    double published = now();
    wait_for(&c, replies_all, count, 10, 300);
    pthread_mutex_lock(&c.lock);
    long replies = c.replies;
    double last = c.last_reply;
    pthread_mutex_unlock(&c.lock);
    for (long i = 0; i < count; i++) {
        snprintf(topic, sizeof topic, "beacons/100/%ld/observers/flood-%ld", i % 1000 + 1, i);
        int rc;
        while ((rc = mosquitto_publish(c.mosq, NULL, topic, 0, NULL, 1, true)) == MOSQ_ERR_NOMEM) usleep(100);
    }
    // Every join and every leave on the broker before disconnecting.
    wait_acknowledged(&c, 2 * count, 120);
    double left = now();
    printf("{\"mode\":\"flood\",\"sent\":%ld,\"publishSeconds\":%.6f,\"publishedPerSecond\":%.0f,\"replies\":%ld,"
           "\"repliedSeconds\":%.6f,\"repliesPerSecond\":%.0f,\"leaveSeconds\":%.6f}\n",
           count, published - start, (double)count / (published - start), replies, last - start,
           replies > 0 && last > start ? (double)replies / (last - start) : 0, left - published);
    usleep(500000);
    client_stop(&c);
    return replies == count ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: mqtt-baseline pub|reports|sub|rtt|join|flood --port P [--count N] [...]\n");
        return 2;
    }
    const char *mode = argv[1];
    int port = 1883;
    long count = 100000, beacons = 1000, burst = 1000, stores = 50;
    double idle = 3, rate = 0, interval = 0;
    const char *filters[16] = {"beacons/+/+"}, *latency_out = NULL, *id = "bench";
    int nfilters = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *key = argv[i], *value = argv[i + 1];
        if (!strcmp(key, "--port")) port = atoi(value);
        else if (!strcmp(key, "--count")) count = atol(value);
        else if (!strcmp(key, "--beacons")) beacons = atol(value);
        else if (!strcmp(key, "--burst")) burst = atol(value);
        else if (!strcmp(key, "--stores")) stores = atol(value);
        else if (!strcmp(key, "--idle")) idle = atof(value);
        else if (!strcmp(key, "--rate")) rate = atof(value);
        else if (!strcmp(key, "--filter")) {
            if (nfilters == 16) { fprintf(stderr, "mqtt-baseline: at most 16 --filter\n"); return 2; }
            filters[nfilters++] = value;
        }
        else if (!strcmp(key, "--latency-out")) latency_out = value;
        else if (!strcmp(key, "--id")) id = value;
        else if (!strcmp(key, "--interval")) interval = atof(value);
        else { fprintf(stderr, "mqtt-baseline: unknown option %s\n", key); return 2; }
    }
    if (count < 1 || beacons < 1 || stores < 1 || burst < 0 || port < 1 || port > 65535) {
        fprintf(stderr, "mqtt-baseline: counts must be positive and the port 1-65535\n");
        return 2;
    }
    mosquitto_lib_init();
    int status;
    if (!strcmp(mode, "pub")) status = mode_pub(port, count, beacons, rate, 0);
    else if (!strcmp(mode, "reports")) status = mode_pub(port, count, beacons, rate, 1);
    else if (!strcmp(mode, "sub")) status = mode_sub(port, count, filters, nfilters ? nfilters : 1, idle, latency_out);
    else if (!strcmp(mode, "rtt")) status = mode_rtt(port, count);
    else if (!strcmp(mode, "join")) status = mode_join(port, count, burst, stores, id, interval);
    else if (!strcmp(mode, "flood")) status = mode_flood(port, count);
    else { fprintf(stderr, "mqtt-baseline: unknown mode %s\n", mode); status = 2; }
    mosquitto_lib_cleanup();
    return status;
}
