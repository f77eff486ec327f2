package dev.v100.runtime.server;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static dev.v100.runtime.server.TestHttp.HANG_GUARD;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ServeCommandTest {
    @TempDir
    Path bundle;

    @Test
    void servesAfterLoadingAndClosesTheEngineOnShutdown() throws Exception {
        CountDownLatch loaded = new CountDownLatch(1);
        ScriptedEngine engine = new ScriptedEngine();
        AtomicReference<String> seenBackend = new AtomicReference<>();
        ServeCommand serve = new ServeCommand((path, backend, maxBatch) -> {
            assertEquals(bundle, path);
            seenBackend.set(backend);
            loaded.await();                               // the server is up and "loading" meanwhile
            return engine;
        });
        StringWriter out = new StringWriter();
        CommandLine cli = new CommandLine(serve).setOut(new PrintWriter(out));
        CompletableFuture<Integer> exit = CompletableFuture.supplyAsync(() -> cli.execute(bundle.toString(),
                "--port", "0", "--backend", "cuda", "--model-id", "served", "--api-key", "k", "--queue", "3"));

        TestHttp http = new TestHttp(serve.awaitPort(HANG_GUARD));
        TestHttp.assertError(http.get("/health"), 503, ApiException.UNAVAILABLE);
        loaded.countDown();
        long deadline = System.nanoTime() + HANG_GUARD.toNanos();
        while (http.get("/health").statusCode() != 200) {
            assertTrue(System.nanoTime() < deadline, "serve never became ready");
            Thread.sleep(10);
        }
        assertEquals("served", TestHttp.json(http.get("/v1/models")).get("data").get(0).get("id").textValue());
        assertEquals(401, http.post("/v1/completions", "{\"prompt\":\"x\"}").statusCode());
        assertEquals(200, http.post("/v1/completions", "{\"prompt\":\"x\"}", "X-Api-Key", "k").statusCode());
        assertEquals("cuda", seenBackend.get());

        serve.shutdown();
        assertEquals(0, exit.get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS));
        assertTrue(engine.closed.get(), "engine closed after the server stopped");
        assertTrue(out.toString().contains("ready: model served"), out.toString());
    }

    @Test
    void loadFailureExitsWithOneAndAMessage() {
        ServeCommand serve = new ServeCommand((path, backend, maxBatch) -> {
            throw new java.io.IOException("manifest.json is missing");
        });
        StringWriter err = new StringWriter();
        int code = new CommandLine(serve).setErr(new PrintWriter(err)).setOut(new PrintWriter(new StringWriter()))
                .execute(bundle.toString(), "--port", "0");
        assertEquals(1, code);
        assertTrue(err.toString().contains("manifest.json is missing"), err.toString());
    }

    @Test
    void badArgumentsExitWithTwo() {
        ServeCommand serve = new ServeCommand((path, backend, maxBatch) -> {
            throw new AssertionError("must not load");
        });
        StringWriter err = new StringWriter();
        CommandLine cli = new CommandLine(serve).setErr(new PrintWriter(err)).setOut(new PrintWriter(new StringWriter()));
        assertEquals(2, cli.execute(bundle.toString(), "--backend", "tpu"));
        assertTrue(err.toString().contains("--backend must be cpu or cuda"), err.toString());
        assertEquals(2, cli.execute(bundle.resolve("missing").toString()));
        assertEquals(2, cli.execute(bundle.toString(), "--queue", "0"));
        assertEquals(2, cli.execute(bundle.toString(), "--max-batch", "65"));
        assertTrue(err.toString().contains("--max-batch must be 1..64"), err.toString());
        assertEquals(2, cli.execute(bundle.toString(), "--max-batch", "0"));
    }
}
