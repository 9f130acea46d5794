// The task, independent of where it is hosted: an adapter passes the assignment in and takes the answers out
// (onSubmit). The assignment's kind picks the page from the registry of kinds/ (kinds/index.js); an assignment of a
// kind this bundle has no page for says so instead of guessing.
import { PAGES } from "./kinds/index.js";

export default function TaskApp({ assignment, onSubmit, onDone, rater = null, submissionId = null }) {
  const Page = PAGES[assignment.kind];
  if (!Page) {
    return (
      <main><p className="error" role="alert" id="unknown-kind">This page cannot show an assignment of the kind
        {" "}{String(assignment.kind)}: the task page needs to be rebuilt (make ui).</p></main>
    );
  }
  return <Page assignment={assignment} onSubmit={onSubmit} onDone={onDone} rater={rater} submissionId={submissionId} />;
}
