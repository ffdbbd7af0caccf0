// HttpGet.java — the JVM client of tests/e2e/36-client-matrix.t, run as a
// single-file program (`java HttpGet.java URL...`) with default settings:
// java.net.http.HttpClient on dual-stack (AF_INET6) sockets unless
// -Djava.net.preferIPv4Stack=true. Prints per URL: "<status> <hostname>"
// (hostname: the "hostname" field of the zerohop echo JSON), or "ERR <why>".
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class HttpGet {
	public static void main(String[] args) {
		HttpClient c = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(3)).build();
		Pattern host = Pattern.compile("\"hostname\":\"([^\"]*)\"");
		for (String u : args) {
			try {
				HttpRequest r = HttpRequest.newBuilder(URI.create(u)).timeout(Duration.ofSeconds(5)).build();
				HttpResponse<String> resp = c.send(r, HttpResponse.BodyHandlers.ofString());
				Matcher m = host.matcher(resp.body());
				System.out.println(resp.statusCode() + " " + (m.find() ? m.group(1) : "?"));
			} catch (Exception e) {
				System.out.println("ERR " + e.getClass().getSimpleName());
			}
		}
	}
}
