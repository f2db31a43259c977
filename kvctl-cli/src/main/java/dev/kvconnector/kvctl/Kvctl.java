package dev.kvconnector.kvctl;

import dev.kvconnector.demo.EngineCommand;
import dev.kvconnector.demo.launcher.DemoCommand;
import dev.kvconnector.error.KVException;
import dev.kvconnector.lmcache.LmServerCommand;
import dev.kvconnector.proxy.ProxyCommand;
import java.io.PrintWriter;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * {@code kvctl}: keys, objects, health and benchmarks of kvconnector stores from the command line.
 *
 * <p>Exit codes: 0 success; 3 a miss (the key is absent); 2 bad usage; 1 any other failure, printed with its hint.
 */
@Command(name = "kvctl", mixinStandardHelpOptions = true, version = "kvctl 0.1.0",
        description = "Inspect and exercise kvconnector stores.",
        subcommands = {KeyCommand.class, PutCommand.class, GetCommand.class, ExistsCommand.class, RmCommand.class,
                DoctorCommand.class, BenchCommand.class, DemoCommand.class, EngineCommand.class, ProxyCommand.class,
                LmServerCommand.class})
public final class Kvctl {
    /** Exit code of a miss. */
    public static final int EXIT_MISS = 3;
    /** Exit code of a failure. */
    public static final int EXIT_FAILURE = 1;

    private Kvctl() {
    }

    /** Runs kvctl and exits with its code. */
    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** Runs kvctl and returns its exit code (used by tests). */
    public static int run(String... args) {
        CommandLine cl = new CommandLine(new Kvctl());
        // Every subcommand takes -h/--help and -V/--version (kvctl's), whether or not its class asks for them.
        for (CommandLine sub : cl.getSubcommands().values()) {
            sub.getCommandSpec().mixinStandardHelpOptions(true);
            if (sub.getCommandSpec().version().length == 0) {
                sub.getCommandSpec().version(cl.getCommandSpec().version());
            }
        }
        cl.setExecutionExceptionHandler((ex, cmd, parse) -> {
            PrintWriter err = cmd.getErr();
            if (ex instanceof KVException kv) {
                err.println("kvctl " + cmd.getCommandName() + ": " + kv.getMessage());
            } else {
                err.println("kvctl " + cmd.getCommandName() + ": " + ex);
            }
            err.flush();
            return EXIT_FAILURE;
        });
        return cl.execute(args);
    }
}
