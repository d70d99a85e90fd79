// Runs several Apache Kafka command-line tools (their main classes, as the bin/*.sh scripts do) one after the other
// in ONE JVM, to keep the integration tests' JVM start-ups few. Steps are separated by a "::" argument:
//
//   ToolBatch org.apache.kafka.tools.TopicCommand --bootstrap-server B --list :: org.apache.kafka.tools.X ...
//
// The tools end with Exit.exit(code) (org.apache.kafka.common.utils.internals in 4.x); the exit procedure is replaced by one that
// records the code and throws, so the step ends there and the next step runs. Some tools call Exit.exit inside a
// try whose catch turns any Throwable into exit code 1 (TopicCommand: execute() exits in a finally block), so the
// step's code is the FIRST code the tool asked to exit with. Each step's stdout and stderr are captured
// and printed as one JSON line: {"class": C, "exit": code, "stdout": ..., "stderr": ...}. The batch itself exits 0
// unless a step could not be run at all (class missing).
package mala.it;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.utils.internals.Exit; // moved here in Kafka 4.x

public final class ToolBatch {
  private static final class ExitCalled extends RuntimeException {
    final int code;

    ExitCalled(int code) {
      super("exit " + code, null, false, false);
      this.code = code;
    }
  }

  private static Integer firstExit;

  public static void main(String[] args) throws Exception {
    List<List<String>> steps = new ArrayList<>();
    List<String> cur = new ArrayList<>();
    for (String a : args) {
      if (a.equals("::")) {
        if (!cur.isEmpty()) steps.add(cur);
        cur = new ArrayList<>();
      } else {
        cur.add(a);
      }
    }
    if (!cur.isEmpty()) steps.add(cur);

    PrintStream realOut = System.out;
    PrintStream realErr = System.err;
    Exit.setExitProcedure((code, message) -> {
      if (firstExit == null) firstExit = code;
      throw new ExitCalled(code);
    });
    int batchExit = 0;
    for (List<String> step : steps) {
      String cls = step.get(0);
      String[] toolArgs = step.subList(1, step.size()).toArray(new String[0]);
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      int code = 0;
      firstExit = null;
      System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
      System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
      try {
        Method main = Class.forName(cls).getMethod("main", String[].class);
        main.invoke(null, (Object) toolArgs);
      } catch (InvocationTargetException e) {
        Throwable cause = e.getCause();
        if (cause instanceof ExitCalled ec) {
          code = ec.code;
        } else {
          cause.printStackTrace();
          code = 255;
        }
      } catch (ReflectiveOperationException e) {
        e.printStackTrace();
        code = 254;
        batchExit = 1;
      } finally {
        System.out.flush();
        System.err.flush();
        System.setOut(realOut);
        System.setErr(realErr);
      }
      if (firstExit != null) code = firstExit;
      // Drop the traces of our own exit exception that tools print when they catch it.
      StringBuilder errText = new StringBuilder();
      for (String line : err.toString(StandardCharsets.UTF_8).split("\n", -1)) {
        if (line.contains("ToolBatch$ExitCalled") || line.matches("exit -?\\d+")) continue;
        errText.append(line).append('\n');
      }
      realOut.println("{\"class\":" + Json.str(cls) + ",\"exit\":" + code
          + ",\"stdout\":" + Json.str(out.toString(StandardCharsets.UTF_8))
          + ",\"stderr\":" + Json.str(errText.toString().strip()) + "}");
      realOut.flush();
    }
    Exit.resetExitProcedure();
    System.exit(batchExit);
  }
}
