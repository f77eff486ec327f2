package dev.v100.runtime.server;

import java.time.Duration;

/**
 * Runs the server on the scripted engine for client checks (runtime/src/test/python/openai_client_check.py):
 * {@code java -cp ... dev.v100.runtime.server.ScriptedServerMain [port [apiKey|- [pingMillis]]]}. Replies "Hello, world!";
 * when the request carries tools and the prompt mentions "weather", replies with a hermes tool call.
 */
public final class ScriptedServerMain {
    private ScriptedServerMain() {}

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 8000;
        String apiKey = args.length > 1 && !args[1].equals("-") ? args[1] : null;
        Duration ping = args.length > 2 ? Duration.ofMillis(Long.parseLong(args[2])) : ServerOptions.DEFAULT_PING_INTERVAL;
        ScriptedEngine engine = new ScriptedEngine("scripted-test-model", 4096, 1);
        engine.script(prompt -> prompt.startsWith("<|tools|>") && prompt.contains("weather")
                ? ScriptedEngine.Script.reply("<tool_call>", "\n{\"name\": \"get_weather\", \"arguments\": ",
                        "{\"city\": \"Paris\"}}\n", "</tool_call>")
                : ScriptedEngine.Script.reply("Hello", ",", " world", "!").perToken(Duration.ofMillis(20)));
        OpenAiServer server = new OpenAiServer(ServerOptions.defaults().withPort(port).withApiKey(apiKey).withPingInterval(ping),
                engine);
        server.start();
        Runtime.getRuntime().addShutdownHook(new Thread(server::stop));
        System.out.println("listening on http://127.0.0.1:" + server.port() + "/v1");
        System.out.flush();
        Thread.currentThread().join();
    }
}
