package dev.v100.runtime.server;

import dev.v100.runtime.engine.Engine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * {@code v100-run serve BUNDLE}: binds the port at once (503 "Loading model" on /health), loads the
 * bundle through the {@link EngineFactory}, then serves until the JVM is asked to stop (SIGINT/SIGTERM).
 * Exit codes: 0 after a clean shutdown, 1 when the bundle cannot be loaded or the port cannot be
 * bound, 2 for bad arguments.
 */
@Command(name = "serve", mixinStandardHelpOptions = true,
        description = "Serve a bundle over an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions,"
                + " /v1/models, /health).")
public final class ServeCommand implements Callable<Integer> {
    private static final Set<String> BACKENDS = Set.of("cpu", "cuda");

    @Spec
    private CommandSpec spec;

    @Parameters(index = "0", paramLabel = "BUNDLE", description = "bundle directory written by v100-convert")
    private Path bundle;

    @Option(names = "--host", defaultValue = ServerOptions.DEFAULT_HOST, description = "interface to bind (default: ${DEFAULT-VALUE})")
    private String host;

    @Option(names = "--port", defaultValue = "" + ServerOptions.DEFAULT_PORT, description = "TCP port, 0 = any free (default: ${DEFAULT-VALUE})")
    private int port;

    @Option(names = "--api-key", description = "require this key (Authorization: Bearer or X-Api-Key) on /v1/*;"
            + " also read from $V100_API_KEY")
    private String apiKey;

    @Option(names = "--queue", defaultValue = "" + ServerOptions.DEFAULT_QUEUE_CAPACITY,
            description = "requests that may wait for a worker before 429 (default: ${DEFAULT-VALUE})")
    private int queue;

    @Option(names = "--model-id", description = "model id to serve and accept (default: the bundle's)")
    private String modelId;

    @Option(names = "--backend", defaultValue = "cpu", description = "cpu or cuda (default: ${DEFAULT-VALUE})")
    private String backend;

    @Option(names = "--max-batch", defaultValue = "1",
            description = {"requests generated at once, each in its own KV cache, their decode steps batched into one pass",
                    "(weights read once for all; default: ${DEFAULT-VALUE}, one at a time, the rest wait in the queue)"})
    private int maxBatch;

    @Option(names = "--default-max-tokens", defaultValue = "0",
            description = "max_tokens when a request gives none; 0 = the rest of the context (default: ${DEFAULT-VALUE})")
    private int defaultMaxTokens;

    @Option(names = "--ping-interval-ms", defaultValue = "5000",
            description = "SSE ping / disconnect probe interval (default: ${DEFAULT-VALUE})")
    private long pingIntervalMillis;

    @Option(names = "--max-body-bytes", defaultValue = "" + ServerOptions.DEFAULT_MAX_REQUEST_BODY_BYTES,
            description = "largest accepted request body (default: ${DEFAULT-VALUE})")
    private long maxBodyBytes;

    private final EngineFactory factory;
    private final CountDownLatch listening = new CountDownLatch(1);
    private final CountDownLatch stopped = new CountDownLatch(1);
    private volatile OpenAiServer server;
    private volatile Engine engine;
    private boolean shutDown;

    public ServeCommand(EngineFactory factory) {
        this.factory = factory;
    }

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        if (!BACKENDS.contains(backend)) {
            throw new ParameterException(spec.commandLine(), "--backend must be cpu or cuda, got '" + backend + "'");
        }
        if (maxBatch < 1 || maxBatch > dev.v100.runtime.model.DecoderModel.MAX_SLOTS) {   // before the model loads, not after
            throw new ParameterException(spec.commandLine(), "--max-batch must be 1.." + dev.v100.runtime.model.DecoderModel.MAX_SLOTS
                    + " (the sequence slots a model has), got " + maxBatch);
        }
        if (apiKey == null) {
            String env = System.getenv("V100_API_KEY");
            apiKey = env == null || env.isEmpty() ? null : env;
        }
        ServerOptions options;
        try {
            options = new ServerOptions(host, port, apiKey, modelId, queue, maxBodyBytes,
                    Duration.ofMillis(pingIntervalMillis), defaultMaxTokens);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage());
        }
        if (!Files.isDirectory(bundle)) {
            throw new ParameterException(spec.commandLine(), "bundle directory not found: " + bundle);
        }

        OpenAiServer s = new OpenAiServer(options);
        try {
            s.start();
        } catch (java.io.IOException e) {
            err.println("serve: cannot listen on " + host + ":" + port + ": " + e.getMessage());
            return 1;
        }
        server = s;
        Thread hook = Thread.ofPlatform().name("v100-serve-shutdown").unstarted(this::shutdown);
        Runtime.getRuntime().addShutdownHook(hook);
        listening.countDown();
        out.println("serve: listening on http://" + host + ":" + s.port() + " (loading " + bundle + " on "
                + backend + ")");
        out.flush();

        Engine e;
        try {
            e = factory.open(bundle, backend, maxBatch);
        } catch (Exception | LinkageError ex) {
            err.println("serve: cannot load " + bundle + " on " + backend + ": " + ex.getMessage());
            err.flush();
            shutdown();
            removeHook(hook);
            return 1;
        }
        synchronized (this) {
            if (shutDown) {                              // stopped while loading
                e.close();
                return 0;
            }
            engine = e;
            s.engineLoaded(e);
        }
        out.println("serve: ready: model " + (modelId != null ? modelId : e.modelId()) + ", context "
                + e.contextLength() + " tokens");
        out.flush();
        try {
            stopped.await();
        } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            shutdown();
        }
        removeHook(hook);
        return 0;
    }

    /** The bound port, once listening (for tests and wrappers). */
    public int awaitPort(Duration timeout) throws InterruptedException {
        if (!listening.await(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("serve did not start listening within " + timeout);
        }
        return server.port();
    }

    /** Stops the server, then closes the engine; idempotent. Also the JVM shutdown hook. */
    public void shutdown() {
        synchronized (this) {
            if (shutDown) {
                return;
            }
            shutDown = true;
        }
        OpenAiServer s = server;
        if (s != null) {
            s.stop();
        }
        Engine e = engine;
        if (e != null) {
            e.close();
        }
        stopped.countDown();
    }

    private static void removeHook(Thread hook) {
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException alreadyShuttingDown) {
            // the hook is running or has run: nothing to undo
        }
    }
}
